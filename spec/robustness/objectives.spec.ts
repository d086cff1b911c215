import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { tensor } from '../../src/index.js';
import { BatchError, makeObjective, OBJECTIVE_NAMES, type RolloutBatch } from '../../src/objectives/index.js';

/**
 * An objective given NaN log-probs without `validateBatch` returned NaN, or (DisCO) a finite loss
 * with NaN gradients, or dropped its KL term; a mask of 0.5 was accepted. On a synchronous backend the objectives
 * now check the values themselves (`checkBatch`) and throw a `BatchError` naming the field and the index.
 */
const B = 4;
const T = 3;
const base = (): { logp: number[]; old: number[]; ref: number[]; mask: number[] } => ({
  logp: Array.from({ length: B * T }, (_, i) => -0.5 - 0.1 * i),
  old: Array.from({ length: B * T }, (_, i) => -0.6 - 0.1 * i),
  ref: Array.from({ length: B * T }, (_, i) => -0.7 - 0.05 * i),
  mask: [1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1],
});
const batchOf = (v: ReturnType<typeof base>): RolloutBatch => ({
  logProbs: tensor(v.logp, [B, T], { dtype: 'f64' }),
  oldLogProbs: tensor(v.old, [B, T], { dtype: 'f64' }),
  refLogProbs: tensor(v.ref, [B, T], { dtype: 'f64' }),
  mask: tensor(v.mask, [B, T], { dtype: 'f64' }),
  rewards: [1, 0, 1, 0],
  groupIds: [0, 0, 1, 1],
});

function lossError(name: string, v: ReturnType<typeof base>): unknown {
  const obj = makeObjective(name, { beta: 0.04 });
  if (E.isLeft(obj)) throw obj.left;
  try {
    obj.right.loss(batchOf(v), { step: 1, totalSteps: 10 });
    return null;
  } catch (e) {
    return e;
  }
}

describe('objectives check their batch values on the CPU backend', () => {
  for (const name of OBJECTIVE_NAMES) {
    it(`${name}: NaN/Inf log-probs at completion tokens and non-0/1 masks are BatchErrors; padding may hold NaN`, () => {
      expect(lossError(name, base())).toBeNull();
      const cases: [keyof ReturnType<typeof base>, number, number, string][] = [
        ['logp', 4, Number.NaN, 'logProbs'],
        ['old', 0, Number.POSITIVE_INFINITY, 'oldLogProbs'],
        ['ref', 11, Number.NaN, 'refLogProbs'],
        ['mask', 5, 0.5, 'mask'],
      ];
      for (const [field, index, value, named] of cases) {
        const v = base();
        v[field][index] = value;
        const err = lossError(name, v);
        expect(err, `${field}[${index}] = ${value}`).toBeInstanceOf(BatchError);
        expect((err as BatchError).field).toBe(named);
        expect((err as BatchError).index).toBe(index);
      }
      const padded = base();
      padded.logp[2] = Number.NaN; // mask 0 there
      expect(lossError(name, padded)).toBeNull();
    });
  }
});
