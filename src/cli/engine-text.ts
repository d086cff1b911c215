import { escapeControls } from '../core/errors.js';

/**
 * Text written into another engine's configuration, a bash script (verl) or a TOML file (prime-rl). A value that
 * came from outside (a path, a run directory's name, a recorded setting) is escaped for each language it passes
 * through, comments included, so that none can end a line, start a command or a key, or change what a setting
 * reads: a run directory named `r<newline>touch PWNED` once ran as a command of the verl script.
 */

/** A comment's text: control characters (newlines among them) and bidi controls as visible `\xNN` escapes. */
export const commentText = (text: string): string => escapeControls(text);

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `text` cannot be written as a value at all, or null: a NUL (no shell variable, argument or path holds one)
 * or an unpaired UTF-16 surrogate (no UTF-8 file holds one; TOML's `\u` escapes name scalar values only).
 */
export function unwritable(text: string): string | null {
  if (text.includes('\0')) return 'holds a NUL character, which no shell word or path can hold';
  if (LONE_SURROGATE.test(text)) return 'holds an unpaired UTF-16 surrogate, which no UTF-8 file can hold';
  return null;
}

/** One bash word, taken literally: single quotes, each `'` written as `'\''`. */
export const shellWord = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;

/** A word bash reads as itself without quotes (no glob, expansion, quote or separator character in it). */
const PLAIN_WORD = /^[A-Za-z0-9_.=/+,:@%-]+$/;
/** `text` as one bash word: as it is where that is literal, else quoted. */
export const shellArg = (text: string): string => (PLAIN_WORD.test(text) ? text : shellWord(text));

/**
 * A string OmegaConf reads as itself: it resolves `${...}` in any string it holds, even one an `oc.env` resolver
 * returned, unless the `$` is escaped as `\${`; a backslash is literal except before `${` (one there is written
 * as two). Checked against OmegaConf 2.2 in spec/engines/export-escaping.spec.ts where Python has omegaconf.
 */
export const omegaConfText = (text: string): string =>
  text.replace(/(\\*)\$\{/g, (_m, slashes: string) => `${slashes}${slashes}\\\${`);

/**
 * A string Hydra's override grammar reads as itself when written bare: a path (it holds a `/`, so it reads as no
 * number, boolean or null) of characters with no meaning to the grammar or to bash.
 */
export const hydraPlainPath = (text: string): boolean => /^[A-Za-z0-9_.+-]*\/[A-Za-z0-9_./+-]*$/.test(text);

const TOML_ESCAPES: Readonly<Record<string, string>> = {
  '\b': '\\b',
  '\t': '\\t',
  '\n': '\\n',
  '\f': '\\f',
  '\r': '\\r',
  '"': '\\"',
  '\\': '\\\\',
};

/**
 * A TOML basic string: `"` and `\` escaped, and every control character (C0, DEL, C1) and line or paragraph
 * separator as an escape, since TOML forbids most of them raw. The caller checks `unwritable` first.
 */
export const tomlString = (text: string): string =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it escapes
  `"${text.replace(/[\x00-\x1f\x7f-\x9f"\\\u2028\u2029]/g, (c) => TOML_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`)}"`;

/** A TOML key: bare where TOML allows it, else a quoted key. */
export const tomlKey = (key: string): string => (/^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key));
