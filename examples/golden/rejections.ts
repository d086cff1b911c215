/**
 * The bad input both sides refuse, and how: a random valid batch with one entry patched (a NaN or infinite
 * log-prob, old or reference log-prob, reward, advantage or length, a mask entry other than 0 or 1, or any of these
 * at a padding position), run through the TypeScript objective on the reference backend, which is synchronous, so
 * `checkBatch` reads the tensors' values. Each case records the `BatchError` thrown (field, flat index, kind), or the
 * loss when the objective accepts the batch (a patch in padding changes nothing). python/tests/test_golden.py
 * applies the same patch to the Python objective and expects the same.
 */
import * as E from 'fp-ts/lib/Either.js';
import { objectives as obj, Rng, type Tensor, tensor } from '../../src/index.js';
import { backend, batchNeeds, out, pick, randomBatch, randomConfig, type RawBatch, toBatch } from './batches.js';

/** Cases per objective. */
export const REJECTION_CASES = 30;

/** JSON has no NaN or Infinity: they travel as these strings (Number() and Python's float() read them back). */
type Written = number | 'NaN' | 'Infinity' | '-Infinity';
const NON_FINITE: readonly Written[] = ['NaN', 'Infinity', '-Infinity'];

type TensorField = 'logProbs' | 'oldLogProbs' | 'refLogProbs' | 'mask';
type HostField = 'rewards' | 'advantages' | 'lengths';

interface Patch {
  readonly field: TensorField | HostField;
  readonly index: number;
  readonly value: Written;
}

/** `raw` with the patch applied (a copy). */
function patched(raw: RawBatch, p: Patch): RawBatch {
  const xs = [...(raw[p.field] as number[])];
  xs[p.index] = Number(p.value);
  return { ...raw, [p.field]: xs };
}

/** One patch: a tensor entry at a completion token (mostly) or in padding, or a host entry of one row. */
function randomPatch(rng: Rng, raw: RawBatch): Patch {
  const fields: (TensorField | HostField)[] = ['logProbs', 'mask', 'rewards'];
  for (const f of ['oldLogProbs', 'refLogProbs', 'advantages', 'lengths'] as const) if (raw[f]) fields.push(f);
  const field = pick(rng, fields);
  if (field === 'rewards' || field === 'advantages')
    return { field, index: rng.int(raw.b), value: pick(rng, NON_FINITE) };
  if (field === 'lengths') return { field, index: rng.int(raw.b), value: pick(rng, ['NaN', -1, 1.5] as Written[]) };
  const on = raw.mask.flatMap((m, k) => (m === 1 ? [k] : []));
  const off = raw.mask.flatMap((m, k) => (m === 0 ? [k] : []));
  const index = off.length > 0 && (on.length === 0 || rng.uniform() < 0.25) ? pick(rng, off) : pick(rng, on);
  const value = field === 'mask' ? pick(rng, [0.5, 2, -1, 'NaN', 'Infinity'] as Written[]) : pick(rng, NON_FINITE);
  return { field, index, value };
}

function rejectionCase(name: obj.ObjectiveName, rng: Rng, i: number): Record<string, unknown> {
  const parsed = obj.makeObjective(name, randomConfig(name, rng, i));
  if (E.isLeft(parsed)) throw parsed.left;
  const config = parsed.right.config as unknown as Record<string, unknown>;
  const raw = randomBatch(rng, {
    ...batchNeeds(name, parsed.right),
  });
  const progress = { step: rng.int(50), totalSteps: 40 + rng.int(20) };
  const patch = randomPatch(rng, raw);
  const bad = patched(raw, patch);
  const base = { objective: name, config, progress, batch: raw, patch };
  try {
    const lp: Tensor = tensor(bad.logProbs, [bad.b, bad.t], { dtype: 'f64', backend });
    const loss = parsed.right.loss(toBatch(bad, lp), progress).loss;
    return { ...base, loss: out(loss.dataSync()[0]!) };
  } catch (e) {
    if (!(e instanceof obj.BatchError)) throw e;
    return { ...base, error: { field: e.field, index: e.index ?? null, kind: e.kind } };
  }
}

/** REJECTION_CASES per objective, refused or accepted as the TypeScript objective does. */
export function rejectionCases(): Record<string, unknown>[] {
  return obj.OBJECTIVE_NAMES.flatMap((name, n) => {
    const rng = new Rng(6000 + n);
    return Array.from({ length: REJECTION_CASES }, (_, i) => rejectionCase(name, rng, i));
  });
}
