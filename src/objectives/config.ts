import * as E from 'fp-ts/lib/Either.js';
import type { ScaleRewards, StdMode } from './advantages.js';
import { LOSS_TYPE_ALIASES, type LossType } from './aggregate.js';
import { ConfigError } from './errors.js';

/**
 * One typed, readonly config record per objective, with the paper's defaults, and a parser per record that
 * validates at the boundary and returns an fp-ts `Either<ConfigError, Config>`. The `ConfigError` names the
 * field (as the caller spelled it) and says why.
 *
 * Parsers take a partial record; keys may be camelCase (`epsilonHigh`) or TRL/verl snake_case (`epsilon_high`,
 * `loss_type`, `scale_rewards`, `num_generations`, `clip_ratio_c`, ...). Unknown keys are errors (a typo must not
 * silently fall back to a default). `undefined` means "use the default".
 */
export type ConfigInput = Readonly<Record<string, unknown>>;

/** Advantage settings shared by the advantage-based objectives (see `advantages.ts`). */
export interface AdvantageConfig {
  /** TRL `scale_rewards`: 'group' (default), 'batch', 'none' (Dr. GRPO). TRL's legacy booleans map true->'group', false->'none'. */
  readonly scaleRewards: ScaleRewards;
  /** 'population' (paper Eq. 1, default) or 'bessel' (TRL, verl). */
  readonly stdMode: StdMode;
  /** Added to the std: 0 (paper, default), 1e-4 (TRL), 1e-6 (verl). */
  readonly advantageEpsilon: number;
  /** TRL `num_generations` (G). null: groups are read from `groupIds` and may differ in size; a number (>= 2): every group must have exactly G rows. */
  readonly numGenerations: number | null;
}

/** DAPO's soft overlong punishment (added to the reward): see `softOverlongPenalty`. */
export interface OverlongConfig {
  /** L_max, the maximum completion length (TRL `max_completion_len`). */
  readonly maxLength: number;
  /** L_cache, the soft punishment interval (TRL `soft_punish_cache`, verl `overlong_buffer.len`). */
  readonly cacheLength: number;
  /** Multiplier of the penalty (verl `overlong_buffer.penalty_factor`), 1 in DAPO. */
  readonly penaltyFactor: number;
}

/** GRPO and its token-level relatives (DAPO, Dr. GRPO are this record with other defaults). */
export interface GrpoConfig extends AdvantageConfig {
  /** Lower clip epsilon_low, in (0, 1). TRL `epsilon`. */
  readonly epsilon: number;
  /** Upper clip epsilon_high > 0. TRL `epsilon_high`; for GRPO and Dr. GRPO it defaults to `epsilon`. */
  readonly epsilonHigh: number;
  /** KL coefficient for the k3 estimator against `refLogProbs`. 0 as in TRL (DeepSeekMath used 0.04). */
  readonly beta: number;
  /** Aggregation (TRL `loss_type`, verl `loss_agg_mode` names accepted). */
  readonly lossType: LossType;
  /** verl's dual-clip constant `clip_ratio_c` (3.0 in verl) for A < 0, > 1; null: off. */
  readonly dualClip: number | null;
  /** TRL's two-sided clip `delta`: the unclipped ratio is capped at delta (> 1); null: off. */
  readonly delta: number | null;
  /** The `dr_grpo` normaliser (TRL `max_completion_length`); null: the batch's, else its width T. */
  readonly maxCompletionLength: number | null;
  /** DAPO's dynamic-sampling filter: drop groups whose rewards are all equal (0 < N+ < G for binary rewards). */
  readonly dynamicSampling: boolean;
  /** DAPO's soft overlong reward shaping (needs `batch.lengths`); null: off. */
  readonly overlong: OverlongConfig | null;
}

export interface GspoConfig extends AdvantageConfig {
  /** Sequence-ratio clip, in (0, 1): 3e-4 in the GSPO paper. */
  readonly epsilon: number;
  /** 4e-4 in the GSPO paper. */
  readonly epsilonHigh: number;
  readonly beta: number;
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

export interface GmpoConfig extends AdvantageConfig {
  /** Clip range in log space, (0, 1): 0.4 in the GMPO paper (ratio in [e^-0.4, e^0.4]). */
  readonly epsilon: number;
  readonly beta: number;
}

export interface CispoConfig extends AdvantageConfig {
  /**
   * The absolute cap on the detached IS weight, min(rho, epsilonMax); >= 1. 5.0 as TRL recommends. TRL calls it
   * `epsilon_high` (accepted as an alias here): a value below 1, such as the clip default 0.2 or 0.28, would scale
   * even on-policy tokens down and is rejected.
   */
  readonly epsilonMax: number;
  /** The paper's optional lower clip: weight >= 1 - epsilonLow, in (0, 1); null (off) as in practice. */
  readonly epsilonLow: number | null;
  readonly beta: number;
  /** 'dapo' (token mean over the batch, the paper's 1 / sum L) by default. */
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

export interface SapoConfig extends AdvantageConfig {
  /** tau_pos, the gate temperature where A > 0 (TRL `sapo_temperature_pos`, 1.0). */
  readonly temperaturePos: number;
  /** tau_neg, where A <= 0 (TRL `sapo_temperature_neg`, 1.05). */
  readonly temperatureNeg: number;
  readonly beta: number;
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

/** Settings shared by the group-contrast objectives (DisCO, ConSPO): positives vs negatives inside a group. */
export interface ContrastGroupConfig {
  /** A rollout is positive when reward > positiveThreshold (binary rewards: r = 1), negative otherwise. */
  readonly positiveThreshold: number;
  /** Divide the sum over valid groups by the number of 'all' groups (DisCO's code) or of 'valid' ones (N+ > 0 and N- > 0). */
  readonly groupNormalizer: 'all' | 'valid';
  readonly numGenerations: number | null;
}

export interface DiscoConfig extends ContrastGroupConfig {
  /** 'log-l': s = (1/L) sum_t log pi; 'l-ratio': s = (1/L) sum_t rho (verl `score_func` logL / Lratio). */
  readonly score: 'log-l' | 'l-ratio';
  /** 'disco': mean_+ s - tau log sum_- exp(s / tau); 'disco-b': mean_+ s - mean_- s. */
  readonly variant: 'disco' | 'disco-b';
  /** tau > 0: 10 recommended for 'log-l', 1 for 'l-ratio'. */
  readonly tau: number;
  /** Squared-hinge penalty weight, >= 0 (1e3). */
  readonly beta: number;
  /** KL budget, >= 0 (1e-4). */
  readonly delta: number;
  /** The constrained KL estimate: 'k1' token mean of log pi_old - log pi (default), 'k3' verl's low_var_kl of pi_old from pi. */
  readonly klEstimator: 'k1' | 'k3';
  /** tau log sum exp (default, as in the spec) or tau log mean exp (DisCO's code); they differ by the constant tau log N-. */
  readonly negativeAggregate: 'logsumexp' | 'logmeanexp';
}

export interface ConspoConfig extends ContrastGroupConfig {
  /** Contrastive temperature tau > 0 (paper: 10). */
  readonly tau: number;
  /** Target margin M >= 0 (paper: 0.01). */
  readonly margin: number;
  /** Margin warmup fraction alpha in (0, 1] (paper: 0.3). */
  readonly alpha: number;
  /** 'cosine' (Eq. 16, default), 'fixed' (m = M throughout; Table 6 "w/ fixed margin"), 'none' (m = 0; "w/o scheduled margin"). */
  readonly marginSchedule: 'cosine' | 'fixed' | 'none';
  /** 'infonce' (Eq. 15, default) or 'linear' (Eq. 8's weighted difference; Table 6 "w/o contrastive objective"). */
  readonly contrast: 'infonce' | 'linear';
  /** 'log-likelihood' (default) or 'clipped-ratio' (Eq. 7's s+ and s-; Table 6 "w/o log-likelihood scores"). */
  readonly score: 'log-likelihood' | 'clipped-ratio';
  /** The clip epsilon of the 'clipped-ratio' ablation, (0, 1). */
  readonly epsilon: number;
  /** Its upper epsilon (defaults to `epsilon`). */
  readonly epsilonHigh: number;
  /** Optional k3 KL penalty against `refLogProbs` (token mean), >= 0; 0 as in the paper. */
  readonly beta: number;
}

// ---------------------------------------------------------------------------------------------------------------
// Defaults.

const PAPER_ADV: AdvantageConfig = { scaleRewards: 'group', stdMode: 'population', advantageEpsilon: 0, numGenerations: null };

export const GRPO_DEFAULTS: GrpoConfig = {
  ...PAPER_ADV,
  epsilon: 0.2,
  epsilonHigh: 0.2,
  beta: 0,
  lossType: 'grpo',
  dualClip: null,
  delta: null,
  maxCompletionLength: null,
  dynamicSampling: false,
  overlong: null,
};
/** DAPO: clip-higher (0.2 / 0.28), token-mean, no KL, dynamic sampling on. Overlong shaping needs lengths limits: off until set. */
export const DAPO_DEFAULTS: GrpoConfig = { ...GRPO_DEFAULTS, epsilonHigh: 0.28, lossType: 'dapo', dynamicSampling: true };
/** Dr. GRPO: A = r - mean (no std), `dr_grpo` aggregation. */
export const DR_GRPO_DEFAULTS: GrpoConfig = { ...GRPO_DEFAULTS, scaleRewards: 'none', lossType: 'dr_grpo' };
export const GSPO_DEFAULTS: GspoConfig = { ...PAPER_ADV, epsilon: 3e-4, epsilonHigh: 4e-4, beta: 0, lossType: 'grpo', maxCompletionLength: null };
export const GMPO_DEFAULTS: GmpoConfig = { ...PAPER_ADV, epsilon: 0.4, beta: 0 };
export const CISPO_DEFAULTS: CispoConfig = { ...PAPER_ADV, epsilonMax: 5.0, epsilonLow: null, beta: 0, lossType: 'dapo', maxCompletionLength: null };
export const SAPO_DEFAULTS: SapoConfig = { ...PAPER_ADV, temperaturePos: 1.0, temperatureNeg: 1.05, beta: 0, lossType: 'grpo', maxCompletionLength: null };
const CONTRAST_DEFAULTS: ContrastGroupConfig = { positiveThreshold: 0.5, groupNormalizer: 'all', numGenerations: null };
export const DISCO_DEFAULTS: DiscoConfig = {
  ...CONTRAST_DEFAULTS,
  score: 'log-l',
  variant: 'disco',
  tau: 10,
  beta: 1e3,
  delta: 1e-4,
  klEstimator: 'k1',
  negativeAggregate: 'logsumexp',
};
export const CONSPO_DEFAULTS: ConspoConfig = {
  ...CONTRAST_DEFAULTS,
  tau: 10,
  margin: 0.01,
  alpha: 0.3,
  marginSchedule: 'cosine',
  contrast: 'infonce',
  score: 'log-likelihood',
  epsilon: 0.2,
  epsilonHigh: 0.2,
  beta: 0,
};

// ---------------------------------------------------------------------------------------------------------------
// Validation machinery.

interface Issue {
  readonly path: readonly string[];
  readonly reason: string;
}
type Check<T> = (v: unknown) => E.Either<Issue, T>;
type Spec<C> = { readonly [K in keyof C]-?: Check<C[K]> };

const fail = (reason: string): E.Either<Issue, never> => E.left({ path: [], reason });

const num =
  (ok: (x: number) => boolean, reason: string): Check<number> =>
  (v) =>
    typeof v === 'number' && Number.isFinite(v) && ok(v) ? E.right(v) : fail(typeof v === 'number' ? reason : `must be a number (${reason})`);

const openUnit = num((x) => x > 0 && x < 1, 'must be in (0, 1)');
const unitHalfOpen = num((x) => x > 0 && x <= 1, 'must be in (0, 1]');
const positive = num((x) => x > 0, 'must be > 0');
const nonNegative = num((x) => x >= 0, 'must be >= 0');
const aboveOne = num((x) => x > 1, 'must be > 1');
const atLeastOne = num((x) => x >= 1, 'must be >= 1 (an absolute cap on the IS weight; a cap below 1 shrinks even on-policy tokens)');
const finite = num(() => true, 'must be finite');
const positiveInt = num((x) => Number.isInteger(x) && x > 0, 'must be a positive integer');
const nonNegativeInt = num((x) => Number.isInteger(x) && x >= 0, 'must be a nonnegative integer');
const groupSize = num((x) => Number.isInteger(x) && x >= 2, 'must be an integer >= 2 (a group needs at least two rollouts)');

const nullable =
  <T>(c: Check<T>): Check<T | null> =>
  (v) =>
    v === null ? E.right(null) : c(v);

const bool: Check<boolean> = (v) => (typeof v === 'boolean' ? E.right(v) : fail('must be a boolean'));

function oneOf<T extends string>(values: readonly T[], aliases: Readonly<Record<string, T>> = {}): Check<T> {
  return (v) => {
    if (typeof v === 'string') {
      if ((values as readonly string[]).includes(v)) return E.right(v as T);
      const a = aliases[v];
      if (a !== undefined) return E.right(a);
    }
    const names = [...values, ...Object.keys(aliases).filter((k) => !(values as readonly string[]).includes(k))];
    return fail(`must be one of ${names.map((n) => JSON.stringify(n)).join(', ')}`);
  };
}

const lossType = oneOf<LossType>(['grpo', 'dapo', 'dr_grpo', 'bnpo'], LOSS_TYPE_ALIASES);
const scaleRewards: Check<ScaleRewards> = (v) => {
  if (v === true) return E.right('group');
  if (v === false) return E.right('none');
  return oneOf<ScaleRewards>(['group', 'batch', 'none'])(v);
};
const stdMode = oneOf<StdMode>(['population', 'bessel'], { unbiased: 'bessel', biased: 'population' });

const camel = (k: string): string => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

type Aliases<C> = Readonly<Record<string, keyof C & string>>;

/** The field a caller's key names: itself, an alias, or its camelCase form. */
function resolveKey<C>(spec: Spec<C>, aliases: Aliases<C>, key: string): string | undefined {
  if (key in spec) return key;
  const a = aliases[key];
  if (a !== undefined) return a;
  return camel(key) in spec ? camel(key) : undefined;
}

/** Parse a record: each given key resolved to a field and checked; the rest from `defaults`. Also returns the fields given. */
function parseRecord<C extends object>(spec: Spec<C>, aliases: Aliases<C>, defaults: C, v: unknown): E.Either<Issue, [C, Set<string>]> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('must be a record');
  const out: Record<string, unknown> = { ...(defaults as Record<string, unknown>) };
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(v as Record<string, unknown>)) {
    const field = resolveKey(spec, aliases, key);
    if (field === undefined) return E.left({ path: [key], reason: 'unknown field' });
    const previous = seen.get(field);
    if (previous !== undefined) return E.left({ path: [key], reason: `names the same field as ${previous}` });
    seen.set(field, key);
    if (value === undefined) continue;
    const r = (spec as Record<string, Check<unknown>>)[field]!(value);
    if (E.isLeft(r)) return E.left({ path: [key, ...r.left.path], reason: r.left.reason });
    out[field] = r.right;
  }
  return E.right([out as C, new Set(seen.keys())]);
}

const record =
  <C extends object>(spec: Spec<C>, aliases: Aliases<C>, defaults: C): Check<C> =>
  (v) =>
    E.map(([c]: [C, Set<string>]) => c)(parseRecord(spec, aliases, defaults, v));

/** A cross-field rule run after the fields parse: may fill in a default that depends on another field, or reject. */
type Post<C> = (c: C, given: ReadonlySet<string>) => E.Either<Issue, C>;

function run<C extends object>(objective: string, spec: Spec<C>, aliases: Aliases<C>, defaults: C, input: unknown, post?: Post<C>): E.Either<ConfigError, C> {
  const raw = input ?? {};
  const at = (root: unknown, path: readonly string[]): unknown =>
    path.reduce<unknown>((o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined), root);
  const r = parseRecord(spec, aliases, defaults, raw);
  if (E.isLeft(r)) return E.left(new ConfigError(objective, r.left.path.join('.') || '(config)', at(raw, r.left.path), r.left.reason));
  const [c, given] = r.right;
  if (!post) return E.right(c);
  const p = post(c, given);
  if (E.isLeft(p)) return E.left(new ConfigError(objective, p.left.path.join('.'), at(c, p.left.path), p.left.reason));
  return p;
}

const advantageSpec: Spec<AdvantageConfig> = {
  scaleRewards,
  stdMode,
  advantageEpsilon: nonNegative,
  numGenerations: nullable(groupSize),
};

const overlongSpec: Spec<OverlongConfig> = { maxLength: positiveInt, cacheLength: nonNegativeInt, penaltyFactor: nonNegative };
const overlong: Check<OverlongConfig | null> = nullable((v) =>
  typeof v === 'object' && v !== null && !('maxLength' in v) && !('max_length' in v) && !('max_completion_len' in v)
    ? E.left({ path: ['maxLength'], reason: 'is required' })
    : record<OverlongConfig>(overlongSpec, { max_completion_len: 'maxLength', soft_punish_cache: 'cacheLength', len: 'cacheLength' }, { maxLength: 1, cacheLength: 0, penaltyFactor: 1 })(v),
);

/** verl's `norm_adv_by_std_in_grpo: false` is scaleRewards 'none' (booleans map true -> 'group', false -> 'none'). */
const ADV_ALIASES = { num_generations: 'numGenerations', G: 'numGenerations', norm_adv_by_std_in_grpo: 'scaleRewards' } as const;

const grpoSpec: Spec<GrpoConfig> = {
  ...advantageSpec,
  epsilon: openUnit,
  epsilonHigh: positive,
  beta: nonNegative,
  lossType,
  dualClip: nullable(aboveOne),
  delta: nullable(aboveOne),
  maxCompletionLength: nullable(positiveInt),
  dynamicSampling: bool,
  overlong,
};

/** epsilonHigh follows epsilon when only epsilon is given (TRL: `epsilon_high` defaults to `epsilon`). */
const followEpsilon = <C extends { epsilon: number; epsilonHigh: number }>(c: C, given: ReadonlySet<string>): C =>
  given.has('epsilon') && !given.has('epsilonHigh') ? { ...c, epsilonHigh: c.epsilon } : c;

function grpoPost(follow: boolean): Post<GrpoConfig> {
  return (c0, given) => {
    const c = follow ? followEpsilon(c0, given) : c0;
    if (c.overlong && c.overlong.cacheLength >= c.overlong.maxLength) {
      return E.left({ path: ['overlong', 'cacheLength'], reason: `must be < overlong.maxLength (${c.overlong.maxLength})` });
    }
    return E.right(c);
  };
}

const GRPO_ALIASES: Aliases<GrpoConfig> = {
  ...ADV_ALIASES,
  epsilon_low: 'epsilon',
  clip_ratio_low: 'epsilon',
  clip_ratio_high: 'epsilonHigh',
  clip_ratio_c: 'dualClip',
  loss_agg_mode: 'lossType',
};

/** GRPO (paper defaults: eps 0.2, beta 0, `grpo` aggregation, population std). */
export const parseGrpoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  run('grpo', grpoSpec, GRPO_ALIASES, GRPO_DEFAULTS, input, grpoPost(true));
/** DAPO (eps 0.2 / 0.28, `dapo` aggregation, dynamic sampling). */
export const parseDapoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  run('dapo', grpoSpec, GRPO_ALIASES, DAPO_DEFAULTS, input, grpoPost(false));
/** Dr. GRPO (no std scaling, `dr_grpo` aggregation). */
export const parseDrGrpoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  run('dr_grpo', grpoSpec, GRPO_ALIASES, DR_GRPO_DEFAULTS, input, grpoPost(true));

export const parseGspoConfig = (input: Partial<GspoConfig> | ConfigInput = {}): E.Either<ConfigError, GspoConfig> =>
  run(
    'gspo',
    { ...advantageSpec, epsilon: openUnit, epsilonHigh: positive, beta: nonNegative, lossType, maxCompletionLength: nullable(positiveInt) },
    { ...ADV_ALIASES, epsilon_low: 'epsilon', loss_agg_mode: 'lossType' },
    GSPO_DEFAULTS,
    input,
  );

export const parseGmpoConfig = (input: Partial<GmpoConfig> | ConfigInput = {}): E.Either<ConfigError, GmpoConfig> =>
  run('gmpo', { ...advantageSpec, epsilon: openUnit, beta: nonNegative }, ADV_ALIASES, GMPO_DEFAULTS, input);

export const parseCispoConfig = (input: Partial<CispoConfig> | ConfigInput = {}): E.Either<ConfigError, CispoConfig> =>
  run(
    'cispo',
    {
      ...advantageSpec,
      epsilonMax: atLeastOne,
      epsilonLow: nullable(openUnit),
      beta: nonNegative,
      lossType,
      maxCompletionLength: nullable(positiveInt),
    },
    { ...ADV_ALIASES, epsilon_high: 'epsilonMax', epsilonHigh: 'epsilonMax', epsilon_max: 'epsilonMax', epsilon_low: 'epsilonLow', loss_agg_mode: 'lossType' },
    CISPO_DEFAULTS,
    input,
  );

export const parseSapoConfig = (input: Partial<SapoConfig> | ConfigInput = {}): E.Either<ConfigError, SapoConfig> =>
  run(
    'sapo',
    { ...advantageSpec, temperaturePos: positive, temperatureNeg: positive, beta: nonNegative, lossType, maxCompletionLength: nullable(positiveInt) },
    { ...ADV_ALIASES, sapo_temperature_pos: 'temperaturePos', sapo_temperature_neg: 'temperatureNeg', tau_pos: 'temperaturePos', tau_neg: 'temperatureNeg', loss_agg_mode: 'lossType' },
    SAPO_DEFAULTS,
    input,
  );

const GROUP_ALIASES = { num_generations: 'numGenerations', G: 'numGenerations' } as const;

const contrastSpec: Spec<ContrastGroupConfig> = {
  positiveThreshold: finite,
  groupNormalizer: oneOf(['all', 'valid']),
  numGenerations: nullable(groupSize),
};

export const parseDiscoConfig = (input: Partial<DiscoConfig> | ConfigInput = {}): E.Either<ConfigError, DiscoConfig> =>
  run(
    'disco',
    {
      ...contrastSpec,
      score: oneOf(['log-l', 'l-ratio'], { logL: 'log-l', Lratio: 'l-ratio' }),
      variant: oneOf(['disco', 'disco-b']),
      tau: positive,
      beta: nonNegative,
      delta: nonNegative,
      klEstimator: oneOf(['k1', 'k3'], { kl: 'k1', low_var_kl: 'k3' }),
      negativeAggregate: oneOf(['logsumexp', 'logmeanexp']),
    },
    { ...GROUP_ALIASES, score_func: 'score', kl_type: 'klEstimator' },
    DISCO_DEFAULTS,
    input,
  );

/** ConSPO (paper defaults: tau 10, M 0.01, alpha 0.3, cosine margin, InfoNCE, log-likelihood scores). */
export const parseConspoConfig = (input: Partial<ConspoConfig> | ConfigInput = {}): E.Either<ConfigError, ConspoConfig> =>
  run(
    'conspo',
    {
      ...contrastSpec,
      tau: positive,
      margin: nonNegative,
      alpha: unitHalfOpen,
      marginSchedule: oneOf(['cosine', 'fixed', 'none']),
      contrast: oneOf(['infonce', 'linear']),
      score: oneOf(['log-likelihood', 'clipped-ratio']),
      epsilon: openUnit,
      epsilonHigh: positive,
      beta: nonNegative,
    },
    { ...GROUP_ALIASES, M: 'margin', target_margin: 'margin', warmup_ratio: 'alpha' },
    CONSPO_DEFAULTS,
    input,
    (c, given) => E.right(followEpsilon(c, given)),
  );
