import { readFileSync } from 'node:fs';
import * as E from 'fp-ts/lib/Either.js';
import { expect } from 'vitest';
import * as T from '../../src/index.js';
import { loadHfCheckpoint, type HfModel } from '../../src/io/hf-checkpoint.js';

/**
 * The conformance fixtures (spec/fixtures/hf, computed by transformers 5.17 in float32 from the bf16 weights):
 * a loaded model, the reference tensors, and the quantities to compare computed by this project's forward.
 */
export const FIXTURES = 'spec/fixtures/hf';

export interface Reference {
  readonly inputIds: Int32Array;
  readonly mask: Int32Array;
  readonly b: number;
  readonly t: number;
  readonly logits: Float32Array;
  readonly tokenLogprobs: Float32Array;
  readonly greedy: Int32Array;
  /** grad.<hf name> -> values. */
  readonly grads: ReadonlyMap<string, Float32Array>;
}

export function readReference(name: string): Reference {
  const file = T.decodeSafetensors(readFileSync(`${FIXTURES}/${name}/reference.safetensors`));
  if (E.isLeft(file)) throw file.left;
  const get = (n: string): T.HostTensor => file.right.tensors.get(n)!;
  const grads = new Map<string, Float32Array>();
  for (const [n, t] of file.right.tensors) if (n.startsWith('grad.')) grads.set(n.slice(5), t.data as Float32Array);
  const [b, t] = get('input_ids').shape as [number, number];
  return {
    inputIds: get('input_ids').data as Int32Array,
    mask: get('attention_mask').data as Int32Array,
    b,
    t,
    logits: get('logits').data as Float32Array,
    tokenLogprobs: get('token_logprobs').data as Float32Array,
    greedy: get('greedy_ids').data as Int32Array,
    grads,
  };
}

export async function loadModel(dir: string, backend: T.Backend): Promise<HfModel> {
  const m = await loadHfCheckpoint(dir, backend)();
  if (E.isLeft(m)) throw m.left;
  return m.right;
}

/** position_ids = cumsum(mask) - 1 (0 on padding, where it does not matter) and the key bias of the mask. */
export function inputsOf(ref: Pick<Reference, 'inputIds' | 'mask' | 'b' | 't'>, backend: T.Backend) {
  const { b, t } = ref;
  const positions = new Int32Array(b * t);
  const bias = new Float32Array(b * t);
  for (let r = 0; r < b; r++) {
    let seen = 0;
    for (let j = 0; j < t; j++) {
      seen += ref.mask[r * t + j]!;
      positions[r * t + j] = Math.max(0, seen - 1);
      bias[r * t + j] = ref.mask[r * t + j] ? 0 : T.PAD_BIAS;
    }
  }
  return {
    tokens: T.tensor(ref.inputIds, [b, t], { dtype: 'i32', backend }),
    positions: T.tensor(positions, [b, t], { dtype: 'i32', backend }),
    keyBias: T.tensor(bias, [b, t], { backend }),
  };
}

/** Sum over rows and positions of log p(ids[t+1] | prefix) * mask[t+1], and the per-token values [B, T-1]. */
export function tokenLogprobs(
  model: HfModel,
  params: T.TransformerParams,
  ref: Reference,
  backend: T.Backend,
): T.Tensor {
  const { b, t } = ref;
  const { tokens, positions, keyBias } = inputsOf(ref, backend);
  const logits = T.forward(params, model.config, tokens, { positions, keyBias });
  const next = new Int32Array(b * (t - 1));
  const m = new Float32Array(b * (t - 1));
  for (let r = 0; r < b; r++) {
    for (let j = 0; j < t - 1; j++) {
      next[r * (t - 1) + j] = ref.inputIds[r * t + j + 1]!;
      m[r * (t - 1) + j] = ref.mask[r * t + j + 1]!;
    }
  }
  const lp = T.tokenLogProbs(
    T.slice(logits, [0, 0, 0], [b, t - 1, model.config.vocabSize]),
    T.tensor(next, [b, t - 1], { dtype: 'i32', backend }),
  );
  return T.mul(lp, T.tensor(m, [b, t - 1], { backend }));
}

/** Real (unpadded) positions of the reference batch, for comparisons where padding rows carry no meaning. */
export const realPositions = (ref: Reference): number[] =>
  Array.from({ length: ref.b * ref.t }, (_, i) => i).filter((i) => ref.mask[i] === 1);

export function expectWithin(
  what: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  atol: number,
  indices?: readonly number[],
): number {
  expect(got.length, `${what}: length`).toBe(want.length);
  let worst = 0;
  for (const i of indices ?? Array.from({ length: want.length }, (_, k) => k)) {
    const err = Math.abs(got[i]! - want[i]!);
    if (!(err <= atol))
      expect.fail(`${what}[${i}]: got ${got[i]}, want ${want[i]} (|err| ${err.toExponential(3)} > ${atol})`);
    worst = Math.max(worst, err);
  }
  return worst;
}

/** Greedy continuation of `prompt` rows (no EOS stop), with the KV cache, `steps` tokens. */
export async function greedy(
  model: HfModel,
  params: T.TransformerParams,
  prompts: readonly (readonly number[])[],
  steps: number,
  backend: T.Backend,
): Promise<number[][]> {
  const rows = prompts.map((p) => [...p]);
  let cache: T.KvCache | null = null;
  let input = T.tensor(rows.flat(), [rows.length, rows[0]!.length], { dtype: 'i32', backend });
  for (let s = 0; s < steps; s++) {
    const out: { logits: T.Tensor; cache: T.KvCache } = T.forwardWithCache(params, model.config, input, cache);
    T.disposeCache(cache);
    cache = out.cache;
    input.dispose();
    const n = out.logits.shape[1]!;
    const v = model.config.vocabSize;
    const last = await T.slice(out.logits, [0, n - 1, 0], [rows.length, 1, v]).data();
    out.logits.dispose();
    const picks = rows.map((row, r) => {
      let best = 0;
      for (let k = 1; k < v; k++) if (last[r * v + k]! > last[r * v + best]!) best = k;
      row.push(best);
      return best;
    });
    input = T.tensor(picks, [rows.length, 1], { dtype: 'i32', backend });
  }
  input.dispose();
  T.disposeCache(cache);
  return rows;
}
