import type * as E from 'fp-ts/lib/Either.js';
import { FieldError, quoteValue } from '../core/errors.js';
import {
  finite,
  nonEmptyArrayOf,
  nonNegativeInt,
  oneOf,
  openUnit,
  parseWith,
  positiveInt,
  type Aliases,
  type Spec,
} from '../core/validate.js';

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
  /**
   * Where the inserted context goes. 'before-query' (default, the trainer's too): [S, traces.., S, BOS, query]
   * [completion], the completion follows the query as it does when sampling (same tokens before it, same RoPE
   * offsets to them), so what is learned under the conditioned context carries over to the plain one.
   * 'after-query': [BOS, query, S, traces.., S][completion], the paper's [q; O-] read literally: the completion
   * follows a separator, a context the sampler never produces, and a small policy trained so learned a
   * prompt-dependent task only at chance (docs/ARCHITECTURE.md, "BICC").
   */
  readonly placement: BiccPlacement;
  /**
   * Which rows are conditioned: 'both' (BICC, the default), or only the 'positives' (each under its group's
   * negatives) or only the 'negatives' (each under its group's positives), the unilateral ablations; the other rows
   * stay plain.
   */
  readonly sides: BiccSides;
}

export type BiccSides = 'both' | 'positives' | 'negatives';
export const BICC_SIDES: readonly BiccSides[] = ['both', 'positives', 'negatives'];

export type BiccPlacement = 'after-query' | 'before-query';

/**
 * Which side of the importance ratio BICC conditions on the inserted context (o a scored rollout, c its group's
 * opposite-class traces, q the query):
 * - 'conditioned-policy' (the paper's formula, the default): rho_t = pi_theta(o_t | c, q, o_<t) / pi_old(o_t | q, o_<t);
 *   the policy is scored under the context and differentiated through it, pi_old and pi_ref stay on the plain
 *   prompt (docs/ARCHITECTURE.md, "BICC").
 * - 'conditioned-old' (what the authors' public code sets out to do: its trainer writes the conditioned pass where
 *   pi_old is read): rho_t = pi_theta(o_t | q, o_<t) / pi_old(o_t | c, q, o_<t); the policy is scored on the plain
 *   prompt, and pi_old is the sampling policy's log-probs under the context, computed once per step without a
 *   gradient. Rows left plain (a group without both classes) keep the plain pi_old.
 */
export type BiccRatio = 'conditioned-policy' | 'conditioned-old';
export const BICC_RATIOS: readonly BiccRatio[] = ['conditioned-policy', 'conditioned-old'];
export const BICC_PLACEMENTS: readonly BiccPlacement[] = ['after-query', 'before-query'];

export const BICC_DEFAULTS: BiccOptions = {
  contextShare: 0.4,
  threshold: 0.5,
  placement: 'before-query',
  sides: 'both',
};

/** A BICC option or input is invalid. `field` names it (camelCase), `value` is what was given. */
export class BiccError extends FieldError {
  readonly _tag = 'BiccError' as const;
  constructor(field: string, value: unknown, reason: string) {
    super(field, value, reason, `bicc: ${field} = ${quoteValue(value)}: ${reason}`);
  }
}

const SPEC: Spec<BiccOptions> = {
  contextShare: openUnit,
  contextBudget: positiveInt,
  separator: nonEmptyArrayOf(nonNegativeInt, 'token ids'),
  threshold: finite,
  placement: oneOf(BICC_PLACEMENTS),
  sides: oneOf(BICC_SIDES),
};

const ALIASES: Aliases<BiccOptions> = { reward_threshold: 'threshold' };

const toError = (field: string, value: unknown, reason: string): BiccError => new BiccError(field, value, reason);

/**
 * Parse options at the boundary (camelCase or snake_case keys; unknown keys rejected). Checks that need the
 * model or tokenizer (budget <= maxSeqLen, separator ids in the vocabulary) run in `conditionBatch`.
 */
export function parseBiccOptions(input: unknown = {}): E.Either<BiccError, BiccOptions> {
  return parseWith(toError, SPEC, ALIASES, BICC_DEFAULTS, input, undefined, '(options)');
}
