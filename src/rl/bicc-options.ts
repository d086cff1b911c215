import * as E from 'fp-ts/lib/Either.js';
import { RlvrError } from '../core/errors.js';

/** Options of BICC's batch transformation (`conditionBatch`). */
export interface BiccOptions {
  /**
   * Share of the context budget the inserted context may take (traces and their separators), in (0, 1).
   * Default 0.4, the paper's best.
   */
  readonly contextShare: number;
  /**
   * Total tokens of one conditioned sequence: prompt, inserted context and the completion block (the batch's
   * completion width C). Default: the model's maxSeqLen; never more than it.
   */
  readonly contextBudget?: number;
  /** Token ids written before every inserted trace and once after the last. Default [EOS]. */
  readonly separator?: readonly number[];
  /** A rollout is positive when its reward is above this (default 0.5, as DisCO/ConSPO split groups). */
  readonly threshold: number;
}

export const BICC_DEFAULTS: BiccOptions = { contextShare: 0.4, threshold: 0.5 };

/** A BICC option or input is invalid. `field` names it (camelCase), `value` is what was given. */
export class BiccError extends RlvrError {
  readonly _tag = 'BiccError' as const;
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`bicc: ${field} = ${fmt(value)}: ${reason}`);
  }
}

function fmt(v: unknown): string {
  if (typeof v === 'number' || typeof v === 'boolean' || v === undefined || v === null) return String(v);
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

const ALIASES: Readonly<Record<string, keyof BiccOptions>> = {
  contextShare: 'contextShare',
  context_share: 'contextShare',
  contextBudget: 'contextBudget',
  context_budget: 'contextBudget',
  separator: 'separator',
  threshold: 'threshold',
  reward_threshold: 'threshold',
};

type Field = (v: unknown) => string | null;

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);
const CHECKS: { readonly [K in keyof BiccOptions]-?: Field } = {
  contextShare: (v) => (typeof v === 'number' && v > 0 && v < 1 ? null : 'must be a number in (0, 1)'),
  contextBudget: (v) => (v === undefined || (isInt(v) && v >= 1) ? null : 'must be a positive integer'),
  separator: (v) =>
    v === undefined || (Array.isArray(v) && v.length > 0 && v.every((x) => isInt(x) && x >= 0)) ? null : 'must be a non-empty array of token ids',
  threshold: (v) => (typeof v === 'number' && Number.isFinite(v) ? null : 'must be a finite number'),
};

/**
 * Parse options at the boundary (camelCase or snake_case keys; unknown keys rejected). Checks that need the
 * model or tokenizer (budget <= maxSeqLen, separator ids in the vocabulary) run in `conditionBatch`.
 */
export function parseBiccOptions(input: unknown = {}): E.Either<BiccError, BiccOptions> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return E.left(new BiccError('(options)', input, 'must be an object'));
  const out: Record<string, unknown> = { ...BICC_DEFAULTS };
  for (const [key, value] of Object.entries(input)) {
    const field = ALIASES[key];
    if (field === undefined) return E.left(new BiccError(key, value, `unknown option (expected one of ${Object.keys(CHECKS).join(', ')})`));
    if (value === undefined) continue;
    const issue = CHECKS[field](value);
    if (issue !== null) return E.left(new BiccError(field, value, issue));
    out[field] = field === 'separator' ? [...(value as number[])] : value;
  }
  return E.right(out as unknown as BiccOptions);
}
