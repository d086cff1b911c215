import { ArgumentError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { dispose, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { gather } from '../ops/indexing.js';
import { reshape, slice } from '../ops/movement.js';
import { sampleTokens, type SampledTokens } from '../ops/sampling.js';
import { logSoftmax } from '../ops/softmax.js';
import { createKvCache, disposeCache, repeatCacheRows, type KvCache } from '../nn/kv-cache.js';
import {
  activationDType,
  hiddenStates,
  lmHead,
  PAD_BIAS,
  type TransformerConfig,
  type TransformerParams,
} from '../nn/transformer.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { encodePrompt, type SequenceBatch } from './batch.js';
import { scaleLogits } from './score.js';

export interface SamplerOptions {
  /** Completions per prompt, G (default 1). Rows are grouped: row r belongs to prompt floor(r / G). */
  readonly groupSize?: number;
  readonly maxNewTokens: number;
  /** Default 1. 0 means greedy decoding (log-probs are then those of the unscaled policy). */
  readonly temperature?: number;
  /** Nucleus sampling mass (default 1: no truncation). */
  readonly topP?: number;
  /** Default true. False re-runs the full forward over the prefix for every token (a reference for tests). */
  readonly useKvCache?: boolean;
}

/**
 * Sampled completions in the `SequenceBatch` layout, with what the objectives need beside them. Every other
 * log-prob of a step (pi_old re-scored, pi_ref, BICC's conditioned pi_old) is `scoreRollouts`' (rollout-scores.ts).
 */
export interface Rollouts extends SequenceBatch {
  readonly groupSize: number;
  readonly prompts: readonly string[];
  /** For each row, the index of its prompt. */
  readonly promptIndex: readonly number[];
  /** Decoded completion text of each row (EOS and padding removed): what verifiers see. */
  readonly completions: readonly string[];
  /** Completion tokens of each row, EOS included (the row's completion-mask sum). */
  readonly completionLengths: readonly number[];
  /** Whether each row ended with EOS (false: cut at maxNewTokens). */
  readonly finished: readonly boolean[];
  /**
   * The log-prob of each sampled token [B, C] as the sampler chose it (0 where masked): the log-softmax of the
   * logits divided by the temperature, before top-p truncation, i.e. what `scoreLogProbs(params, ...,
   * { temperature })` gives on a batch-invariant backend (pi_old; `scoreRollouts` re-scores it elsewhere).
   */
  readonly sampledLogProbs: Float32Array;
  /** The temperature log-probs are scored at (1 for greedy runs). */
  readonly scoringTemperature: number;
}

/**
 * Sample G completions for each prompt, all rows of a step in one batch. The tokens are chosen where the
 * log-probs are (`sampleTokens`), with one uniform draw per unfinished row from the seeded `rng` (drawn on the
 * host, uploaded as [B]; none when greedy), so each generated token reads back only the B ids and their B
 * log-probs, whatever the vocabulary. Finished rows are fed PAD (masked as keys) until every row has stopped or
 * maxNewTokens is reached; C is the number of steps run.
 */
export async function sampleRollouts(
  params: TransformerParams,
  config: TransformerConfig,
  tokenizer: Tokenizer,
  prompts: readonly string[],
  rng: Rng,
  opts: SamplerOptions,
): Promise<Rollouts> {
  const g = opts.groupSize ?? 1;
  const temperature = opts.temperature ?? 1;
  const topP = opts.topP ?? 1;
  const maxNew = opts.maxNewTokens;
  if (
    !(
      Number.isInteger(g) &&
      g >= 1 &&
      Number.isInteger(maxNew) &&
      maxNew >= 1 &&
      temperature >= 0 &&
      topP > 0 &&
      topP <= 1
    )
  ) {
    throw new ArgumentError(
      'sampleRollouts',
      `need groupSize >= 1, maxNewTokens >= 1, temperature >= 0, 0 < topP <= 1; got ${JSON.stringify(opts)}`,
    );
  }
  if (prompts.length === 0) throw new ArgumentError('sampleRollouts', 'no prompts');
  const promptIds = prompts.map((p) => encodePrompt(tokenizer, p));
  const promptIndex = prompts.flatMap((_, i) => Array.from({ length: g }, () => i));
  const b = promptIndex.length;
  const p = promptIds.reduce((m, x) => Math.max(m, x.length), 0); // no spread: batches can be large
  if (p + maxNew > config.maxSeqLen)
    throw new ArgumentError(
      'sampleRollouts',
      `prompt length ${p} + maxNewTokens ${maxNew} exceeds maxSeqLen ${config.maxSeqLen}`,
    );
  const width = p + maxNew;
  const tokens = new Int32Array(b * width).fill(tokenizer.pad);
  const mask = new Uint8Array(b * width);
  const pads = promptIndex.map((i) => p - promptIds[i]!.length);
  promptIndex.forEach((i, r) => {
    tokens.set(promptIds[i]!, r * width + pads[r]!);
    mask.fill(1, r * width + pads[r]!, (r + 1) * width);
  });
  const logProbs = new Float32Array(b * maxNew);
  const lengths = new Array<number>(b).fill(0);
  const finished = new Array<boolean>(b).fill(false);
  const dtype = activationDType(params);
  const backend = params.embed.weight.backend;
  const stops = new Set(tokenizer.stopIds);
  const greedy = temperature === 0;
  // Draws keep the Rng's full precision where the backend stores f64 (chooseToken on the host sees exactly these).
  const drawType = backend.supportsDType('f64') ? 'f64' : 'f32';

  // Inputs for columns [from, to) of the rows `rows` (default all): tokens, positions and key bias, uploaded as
  // [rows, to - from].
  const inputs = (
    from: number,
    to: number,
    rows: readonly number[] | null = null,
  ): { tokens: Tensor; positions: Tensor; keyBias: Tensor } => {
    const n = to - from;
    const m = rows?.length ?? b;
    const tk = new Int32Array(m * n);
    const pos = new Int32Array(m * n);
    const bias = new Float64Array(m * n);
    for (let i = 0; i < m; i++) {
      const r = rows?.[i] ?? i;
      for (let j = 0; j < n; j++) {
        tk[i * n + j] = tokens[r * width + from + j]!;
        pos[i * n + j] = Math.max(0, from + j - pads[r]!);
        bias[i * n + j] = mask[r * width + from + j] ? 0 : PAD_BIAS;
      }
    }
    return {
      tokens: tensor(tk, [m, n], { dtype: 'i32', backend }),
      positions: tensor(pos, [m, n], { dtype: 'i32', backend }),
      keyBias: tensor(bias, [m, n], { dtype, backend }),
    };
  };
  // Log-probs [B, V] at the last of the hidden states [B, n, D].
  const lastLogProbs = (hidden: Tensor): Tensor => {
    const [m, n] = hidden.shape as [number, number];
    const last = slice(hidden, [0, n - 1, 0], [m, 1, config.dModel]);
    return reshape(logSoftmax(scaleLogits(lmHead(params, last), temperature), -1), [m, config.vocabSize]);
  };
  // The next token of each of the rows `live` (ascending), chosen on the backend: one draw per unfinished row, in
  // row order (none when greedy), so a seeded run is reproducible (a finished row's result is ignored).
  const pick = (hidden: Tensor, live: readonly number[]): SampledTokens => {
    const u = new Float64Array(live.length);
    if (!greedy) for (let i = 0; i < live.length; i++) if (!finished[live[i]!]) u[i] = rng.uniform();
    const draws = tensor(u, [live.length], { dtype: drawType, backend });
    return sampleTokens(lastLogProbs(hidden), draws, { greedy, topP });
  };

  const useCache = opts.useKvCache ?? true;
  // A prompt's G rows are the same until their first token: where a row's values do not depend on the batch around
  // it (a batch-invariant backend), the prompt runs once and its cache and hidden states are handed to its G rows,
  // the same bits as G runs of it (the prefill was an eighth of an RL step's sampling FLOPs G - 1 times over).
  const once = useCache && g > 1 && backend.batchInvariant;
  const all = Array.from({ length: b }, (_, r) => r);
  const first = tidy(() => {
    const rows = once ? prompts.map((_, i) => i * g) : null;
    const { tokens: tk, ...rest } = inputs(0, p, rows);
    // Room for every position a step will write (prompt + new tokens): each step writes its column in place.
    const cache = useCache ? { cache: createKvCache(params, config, rows?.length ?? b, width) } : {};
    const out = hiddenStates(params, config, tk, { ...rest, ...cache });
    if (!once) return { picked: pick(out.hidden, all), cache: out.cache };
    const index = tensor(Int32Array.from(promptIndex), [b], { dtype: 'i32', backend });
    // Only the last position's hidden state is read: it alone is handed to the rows.
    const last = slice(out.hidden, [0, p - 1, 0], [rows!.length, 1, config.dModel]);
    return { picked: pick(gather(last, index), all), cache: repeatCacheRows(out.cache!, index) };
  });
  let picked: SampledTokens | null = first.picked;
  let cache: KvCache | null = first.cache;
  // The rows the cache and `picked` hold (ascending): on a batch-invariant backend, the finished rows are dropped
  // from the cache once an eighth of them are (a row's values do not depend on the rows beside it); else all.
  let live = all;
  const compact = useCache && backend.batchInvariant;
  let steps = 0;
  try {
    for (let s = 0; s < maxNew; s++) {
      const [ids, chosen] = await Promise.all([picked!.ids.data(), picked!.logProbs.data()]);
      dispose(picked);
      picked = null;
      const col = p + s;
      for (let i = 0; i < live.length; i++) {
        const r = live[i]!;
        if (finished[r]) continue;
        const id = ids[i]!;
        tokens[r * width + col] = id;
        logProbs[r * maxNew + s] = chosen[i]!;
        lengths[r]!++;
        if (stops.has(id)) finished[r] = true;
      }
      for (let r = 0; r < b; r++) if (finished[r] && lengths[r]! <= s) mask[r * width + col] = 0;
      steps = s + 1;
      if (steps === maxNew || finished.every(Boolean)) break;
      const keep = compact ? live.filter((r) => !finished[r]) : live;
      if (keep.length <= live.length - Math.max(1, live.length >> 3)) {
        const at = new Map(live.map((r, i) => [r, i]));
        const index = Int32Array.from(keep, (r) => at.get(r)!);
        const kept = tidy(() => repeatCacheRows(cache!, tensor(index, [keep.length], { dtype: 'i32', backend })));
        disposeCache(cache);
        cache = kept;
        live = keep;
      }
      const prev: KvCache | null = cache;
      const rows = live;
      const next = tidy(() => {
        const input = useCache ? inputs(col, col + 1, rows) : inputs(0, col + 1);
        const out = hiddenStates(params, config, input.tokens, {
          positions: input.positions,
          keyBias: input.keyBias,
          ...(useCache ? { cache: prev } : {}),
        });
        return { picked: pick(out.hidden, rows), cache: out.cache };
      });
      disposeCache(prev);
      cache = next.cache;
      picked = next.picked;
    }
  } finally {
    if (picked) dispose(picked);
    disposeCache(cache);
  }

  const c = steps;
  const t = p + c;
  const batch: SequenceBatch = {
    batchSize: b,
    promptLen: p,
    completionLen: c,
    tokens: new Int32Array(b * t),
    attentionMask: new Uint8Array(b * t),
    completionMask: new Float32Array(b * c),
  };
  const sampledLogProbs = new Float32Array(b * c);
  const completions: string[] = [];
  for (let r = 0; r < b; r++) {
    (batch.tokens as Int32Array).set(tokens.subarray(r * width, r * width + t), r * t);
    (batch.attentionMask as Uint8Array).set(mask.subarray(r * width, r * width + t), r * t);
    for (let j = 0; j < lengths[r]!; j++) (batch.completionMask as Float32Array)[r * c + j] = 1;
    sampledLogProbs.set(logProbs.subarray(r * maxNew, r * maxNew + c), r * c);
    const ids = Array.from(tokens.subarray(r * width + p, r * width + p + lengths[r]!));
    completions.push(tokenizer.decode(finished[r] ? ids.slice(0, -1) : ids));
  }
  return {
    ...batch,
    groupSize: g,
    prompts: [...prompts],
    promptIndex,
    completions,
    completionLengths: lengths,
    finished,
    sampledLogProbs,
    scoringTemperature: temperature === 0 ? 1 : temperature,
  };
}
