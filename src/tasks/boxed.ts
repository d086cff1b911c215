/**
 * Final-answer extraction as the paper's prompt template asks ("put your final answer within \boxed{}"), and
 * number normalisation so that a correct answer is not rejected for its formatting.
 */

const BOXED = /\\boxed\s*\{/g;

/**
 * The contents of the last `\boxed{...}` in `text`, with nested braces balanced (`\boxed{\frac{1}{2}}` gives
 * `\frac{1}{2}`). Null when there is none, or when the last one is not closed (a truncated completion gets no
 * credit for an earlier box it went on to revise).
 */
export function extractBoxed(text: string): string | null {
  let start = -1;
  for (const m of text.matchAll(BOXED)) start = m.index + m[0].length;
  if (start < 0) return null;
  let depth = 1;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return text.slice(start, i);
  }
  return null;
}

const NUMBER = /^([+-]?)(\d*)(?:\.(\d*))?$/;

/**
 * A canonical string for a decimal number written in any of the usual ways: surrounding and inner whitespace,
 * `$...$`, a leading `+`, leading zeros, thousands commas, trailing zeros after the point and `.0` all go;
 * `-0` becomes `0`. Null when `s` is not a plain decimal number.
 */
export function normalizeNumber(s: string): string | null {
  let t = s.replace(/\s+/g, '').replace(/,/g, '');
  if (t.startsWith('$') && t.endsWith('$') && t.length >= 2) t = t.slice(1, -1);
  const m = NUMBER.exec(t);
  if (!m) return null;
  const [, sign, intPart = '', fracPart = ''] = m;
  if (intPart === '' && fracPart === '') return null;
  const int = intPart.replace(/^0+/, '') || '0';
  const frac = fracPart.replace(/0+$/, '');
  const body = frac ? `${int}.${frac}` : int;
  return sign === '-' && body !== '0' ? `-${body}` : body;
}

/** 1 if the last boxed answer of `completion` is the number `answer` (both normalised), else 0. */
export function verifyBoxedNumber(completion: string, answer: string): 0 | 1 {
  const boxed = extractBoxed(completion);
  if (boxed === null) return 0;
  const got = normalizeNumber(boxed);
  return got !== null && got === normalizeNumber(answer) ? 1 : 0;
}

/** `\boxed{answer}`: how the worked solutions end. */
export const boxed = (answer: string): string => `\\boxed{${answer}}`;
