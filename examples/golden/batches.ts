/**
 * The random rollout batches and objective configs the golden vectors are made of (generate.ts, rejections.ts):
 * seeded, so the files are the same on every run.
 */
import { type objectives as obj, ReferenceBackend, type Rng, type Tensor, tensor } from '../../src/index.js';

export const backend = new ReferenceBackend();

/** Outputs to 12 significant digits: 5e-13 relative, far below the 1e-6 the Python test asks, and a third shorter. */
export const out = (x: number): number => (Number.isFinite(x) ? Number(x.toPrecision(12)) : x);
/** Inputs to 4 decimals: short in the file, and the values both sides compute from are exactly these. */
export const inp = (x: number): number => Number(x.toFixed(4));

export interface RawBatch {
  b: number;
  t: number;
  logProbs: number[];
  oldLogProbs?: number[];
  refLogProbs?: number[];
  mask: number[];
  rewards: number[];
  groupIds: number[];
  advantages?: number[];
  lengths?: number[];
  maxCompletionLength?: number;
  numItemsInBatch?: number;
}

export type Kind = 'advantage' | 'contrast';

export interface BatchOptions {
  readonly kind: Kind;
  /** Every group has exactly this many rows (the config's numGenerations), else 1..4. */
  readonly groupSize: number | null;
  readonly withRef: boolean;
  readonly withLengths: boolean;
  /**
   * The old log-probs' distance, drawn when absent: 'far' up to +-12 (ratios up to e^12); 'extreme' up to +-60 for
   * l - l_old and l_ref - l, past the objectives' bound of +-20 (LOG_RATIO_BOUND).
   */
  readonly oldMode?: 'far' | 'extreme';
  /** As verl hands a loss a batch: no empty rows, no precomputed advantages, no micro-batch normaliser. */
  readonly verlShaped?: boolean;
}

export const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[rng.int(xs.length)]!;

/** Fisher-Yates in place. */
function shuffle<T>(rng: Rng, xs: T[]): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

/**
 * A random batch: 1-3 groups (rows shuffled, so a group's rows are not contiguous), T in 1..6, completion masks
 * as prefixes or scattered (zero-length rows included), padding holding arbitrary finite values, uniform groups
 * (all rewards equal: zero advantage), old log-probs near, equal to, far from (extreme ratios, up to e^12) or
 * absent (on-policy), sometimes precomputed advantages, micro-batch normalisers and `dr_grpo` widths; with
 * `oldMode: 'extreme'`, log-ratios up to +-60, past the objectives' bound.
 */
/** What a parsed objective needs of a batch: its kind, the group size, reference log-probs, lengths. */
export function batchNeeds(name: obj.ObjectiveName, objective: obj.BoundObjective): BatchOptions {
  const config = objective.config as unknown as Record<string, unknown>;
  return {
    kind: objective.usesAdvantages ? 'advantage' : 'contrast',
    groupSize: (config.numGenerations as number | null) ?? null,
    withRef: (config.beta as number) > 0 && name !== 'disco',
    withLengths: config.overlong !== null && config.overlong !== undefined,
  };
}

export function randomBatch(rng: Rng, o: BatchOptions): RawBatch {
  const nGroups = 1 + rng.int(3);
  const t = 1 + rng.int(6);
  const rows: number[] = [];
  const ids = shuffle(rng, [3, 7, 11, 42]);
  for (let g = 0; g < nGroups; g++) {
    const size = o.groupSize ?? 1 + rng.int(4);
    for (let k = 0; k < size; k++) rows.push(ids[g]!);
  }
  shuffle(rng, rows);
  const b = rows.length;
  const continuous = o.kind === 'advantage' && rng.uniform() < 0.3;
  const groupReward = new Map<number, number | null>();
  for (const id of new Set(rows)) groupReward.set(id, rng.uniform() < 0.25 ? pick(rng, [0, 1]) : null);
  const rewards = rows.map((id) => {
    const fixed = groupReward.get(id);
    if (fixed !== null && fixed !== undefined) return fixed;
    return continuous ? inp(rng.uniform() * 2 - 0.5) : rng.int(2);
  });
  const mask: number[] = [];
  const scattered = rng.uniform() < 0.2;
  for (let i = 0; i < b; i++) {
    const len = rng.uniform() < 0.08 && !o.verlShaped ? 0 : 1 + rng.int(t);
    for (let j = 0; j < t; j++) mask.push(scattered ? (rng.uniform() < 0.6 ? 1 : 0) : j < len ? 1 : 0);
    if (o.verlShaped && !mask.slice(i * t).includes(1)) mask[i * t] = 1;
  }
  const logProbs = mask.map(() => inp(-5 * rng.uniform()));
  const raw: RawBatch = { b, t, logProbs, mask, rewards, groupIds: rows };
  const oldMode = o.oldMode ?? pick(rng, ['near', 'near', 'far', 'equal', 'absent'] as const);
  if (oldMode !== 'absent') {
    const spread = oldMode === 'near' ? 0.3 : oldMode === 'far' ? 12 : oldMode === 'extreme' ? 60 : 0;
    raw.oldLogProbs = logProbs.map((l) => inp(l + spread * (2 * rng.uniform() - 1)));
  }
  const refSpread = oldMode === 'extreme' ? 60 : 1;
  if (o.withRef || rng.uniform() < 0.3)
    raw.refLogProbs = logProbs.map((l) => inp(l + 2 * refSpread * rng.uniform() - refSpread));
  if (o.kind === 'advantage' && rng.uniform() < 0.15 && !o.verlShaped)
    raw.advantages = rows.map(() => inp(4 * rng.uniform() - 2));
  if (o.withLengths) raw.lengths = rows.map(() => rng.int(14));
  if (rng.uniform() < 0.2) raw.maxCompletionLength = t + rng.int(5);
  if (rng.uniform() < 0.2 && !o.verlShaped) raw.numItemsInBatch = 1 + rng.int(40);
  return raw;
}

export function toBatch(raw: RawBatch, logProbs: Tensor): obj.RolloutBatch {
  const f64 = (xs: number[]): Tensor => tensor(xs, [raw.b, raw.t], { dtype: 'f64', backend });
  const batch: obj.RolloutBatch = {
    logProbs,
    mask: f64(raw.mask),
    rewards: raw.rewards,
    groupIds: raw.groupIds,
    ...(raw.oldLogProbs ? { oldLogProbs: f64(raw.oldLogProbs) } : {}),
    ...(raw.refLogProbs ? { refLogProbs: f64(raw.refLogProbs) } : {}),
    ...(raw.advantages ? { advantages: raw.advantages } : {}),
    ...(raw.lengths ? { lengths: raw.lengths } : {}),
    ...(raw.maxCompletionLength === undefined ? {} : { maxCompletionLength: raw.maxCompletionLength }),
    ...(raw.numItemsInBatch === undefined ? {} : { numItemsInBatch: raw.numItemsInBatch }),
  };
  return batch;
}

export const LOSS_TYPES = ['grpo', 'dapo', 'dr_grpo', 'bnpo'] as const;
const SCALES = ['group', 'batch', 'none'] as const;

/** Random advantage settings (every scaling, both std conventions, epsilon on or off, fixed G or not). */
export function scaling(rng: Rng): obj.AdvantageOptions {
  return {
    scaleRewards: pick(rng, SCALES),
    stdMode: pick(rng, ['population', 'bessel'] as const),
    advantageEpsilon: pick(rng, [0, 1e-4, 1e-6]),
  };
}

function advantageOptions(rng: Rng): obj.AdvantageConfig {
  return { ...scaling(rng), numGenerations: rng.uniform() < 0.25 ? 2 + rng.int(3) : null };
}

/** A random config for each objective (the options it takes), to be parsed and completed by its own parser. */
export function randomConfig(name: obj.ObjectiveName, rng: Rng, i: number): Record<string, unknown> {
  const beta = rng.uniform() < 0.3 ? pick(rng, [0.04, 0.5]) : 0;
  switch (name) {
    case 'grpo':
    case 'dapo':
    case 'dr_grpo': {
      const eps = pick(rng, [0.2, 0.1, 0.28]);
      const c: Record<string, unknown> = {
        ...advantageOptions(rng),
        epsilon: eps,
        epsilonHigh: pick(rng, [eps, 0.28, 0.5]),
        beta,
        lossType: LOSS_TYPES[i % 4],
        dualClip: rng.uniform() < 0.35 ? pick(rng, [3, 1.5]) : null,
        delta: rng.uniform() < 0.25 ? pick(rng, [1.5, 4]) : null,
        maxCompletionLength: rng.uniform() < 0.3 ? 4 + rng.int(6) : null,
        dynamicSampling: rng.uniform() < 0.4,
      };
      if (rng.uniform() < 0.3) c.overlong = { maxLength: 10, cacheLength: pick(rng, [0, 3, 5]), penaltyFactor: 1 };
      return c;
    }
    case 'gspo':
      return {
        ...advantageOptions(rng),
        epsilon: pick(rng, [3e-4, 0.2]),
        epsilonHigh: pick(rng, [4e-4, 0.28]),
        beta,
        lossType: LOSS_TYPES[i % 4],
        maxCompletionLength: rng.uniform() < 0.3 ? 4 + rng.int(6) : null,
      };
    case 'gmpo':
      return {
        ...advantageOptions(rng),
        epsilon: pick(rng, [0.4, 0.2]),
        // null: the paper's symmetric clip; else verl's geo_mean's [-clip_ratio_low, clip_ratio_high].
        epsilonHigh: rng.uniform() < 0.4 ? pick(rng, [0.2, 0.28, 0.6]) : null,
        beta,
      };
    case 'cispo':
      return {
        ...advantageOptions(rng),
        epsilonMax: pick(rng, [5, 1, 2]),
        epsilonLow: rng.uniform() < 0.4 ? pick(rng, [0.2, 0.5]) : null,
        beta,
        lossType: LOSS_TYPES[i % 4],
        maxCompletionLength: rng.uniform() < 0.3 ? 4 + rng.int(6) : null,
      };
    case 'sapo':
      return {
        ...advantageOptions(rng),
        temperaturePos: pick(rng, [1, 0.5, 2]),
        temperatureNeg: pick(rng, [1.05, 0.7, 3]),
        beta,
        lossType: LOSS_TYPES[i % 4],
        maxCompletionLength: rng.uniform() < 0.3 ? 4 + rng.int(6) : null,
      };
    case 'disco':
      return {
        positiveThreshold: pick(rng, [0.5, 0]),
        groupNormalizer: pick(rng, ['all', 'valid']),
        numGenerations: null,
        score: pick(rng, ['log-l', 'l-ratio']),
        variant: pick(rng, ['disco', 'disco-b']),
        tau: pick(rng, [10, 1, 0.5]),
        beta: pick(rng, [1e3, 0, 10]),
        delta: pick(rng, [1e-4, 0, 0.5]),
        klEstimator: pick(rng, ['k1', 'k3']),
        negativeAggregate: pick(rng, ['logsumexp', 'logmeanexp']),
      };
    case 'conspo': {
      const eps = pick(rng, [0.2, 0.1]);
      return {
        positiveThreshold: pick(rng, [0.5, 0]),
        groupNormalizer: pick(rng, ['all', 'valid']),
        numGenerations: null,
        tau: pick(rng, [10, 1, 0.3]),
        margin: pick(rng, [0.01, 0, 0.5]),
        alpha: pick(rng, [0.3, 1]),
        marginSchedule: pick(rng, ['cosine', 'fixed', 'none']),
        contrast: pick(rng, ['infonce', 'linear']),
        score: pick(rng, ['log-likelihood', 'clipped-ratio']),
        epsilon: eps,
        epsilonHigh: pick(rng, [eps, 0.28]),
        beta,
      };
    }
  }
}
