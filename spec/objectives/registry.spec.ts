import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { add, dispose, grad, liveTensors, tensor, tidy, valueAndGrad, type Tensor } from '../../src/index.js';
import {
  dynamicSamplingKeep,
  grpoLoss,
  GRPO_DEFAULTS,
  makeObjective,
  OBJECTIVE_NAMES,
  selectRolloutRows,
  type Metrics,
} from '../../src/objectives/index.js';
import { arbRaw, arbShape, expectAllClose, f64, toBatch } from './helpers.js';

describe('registry and metrics', () => {
  it("each objective's capabilities say what its loss reads: precomputed advantages, the reference log-probs", () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), fc.constantFrom(...OBJECTIVE_NAMES), (raw, name) => {
        // Something to learn from: a mixed group with a scored token (else DAPO's filter or the masks leave a loss
        // that reads nothing).
        const keep = dynamicSamplingKeep(raw.rewards, raw.groupIds);
        fc.pre(keep.some((k, r) => k && raw.mask.slice(r * raw.t, (r + 1) * raw.t).some((m) => m > 0)));
        const progress = { step: 10, totalSteps: 100 };
        for (const beta of [0, 0.04]) {
          const obj = makeObjective(name, { beta });
          if (E.isLeft(obj)) throw obj.left;
          const lossOf = (extra: Parameters<typeof toBatch>[2]): number =>
            tidy(() => obj.right.loss(toBatch(raw, undefined, extra), progress).loss.itemSync());
          const base = lossOf({});
          // Other advantages (a large, varied set) move the loss exactly when the objective uses advantages.
          const advantages = raw.rewards.map((_, i) => 3 * Math.sin(i + 1));
          expect(lossOf({ advantages }) !== base, `${name} advantages`).toBe(obj.right.usesAdvantages);
          // Shifted reference log-probs move the loss exactly when it has a KL term to the reference.
          const shifted = f64(
            raw.ref.map((x) => x - 0.5),
            [raw.b, raw.t],
          );
          expect(lossOf({ refLogProbs: shifted }) !== base, `${name} beta ${beta} reference`).toBe(
            obj.right.klToReference,
          );
        }
      }),
      { numRuns: 30 },
    );
  });

  it('every objective, picked by name: a scalar loss and scalar, finite, detached metrics through valueAndGrad(hasAux)', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), fc.constantFrom(...OBJECTIVE_NAMES), (raw, name) => {
        const obj = makeObjective(name, {});
        if (E.isLeft(obj)) throw obj.left;
        const progress = { step: 10, totalSteps: 100 };
        const f = valueAndGrad(
          (lp: Tensor) => {
            const r = obj.right.loss(toBatch(raw, lp), progress);
            return [r.loss, r.metrics] as [Tensor, Metrics];
          },
          { hasAux: true },
        );
        const [[loss, metrics], g] = f(f64(raw.logp, [raw.b, raw.t]));
        expect(loss.size).toBe(1);
        expect(Number.isFinite(loss.itemSync())).toBe(true);
        expect(g.shape).toEqual([raw.b, raw.t]);
        for (const [k, v] of Object.entries(metrics)) {
          expect(v.size, k).toBe(1);
          expect(Number.isFinite(v.itemSync()), k).toBe(true);
        }
        // detached: a function of the metrics alone has zero gradient
        const gm = grad((lp: Tensor) =>
          Object.values(obj.right.loss(toBatch(raw, lp), progress).metrics).reduce((a, b) => add(a, b)),
        )(f64(raw.logp, [raw.b, raw.t]));
        expect(Array.from(gm.dataSync()).every((x) => x === 0)).toBe(true);
      }),
      { numRuns: 45 },
    );
  });

  it('works in f32 as on a GPU backend (no f64-only path) and agrees with f64 to f32 precision', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), fc.constantFrom(...OBJECTIVE_NAMES), (raw, name) => {
        const obj = makeObjective(name, {});
        if (E.isLeft(obj)) throw obj.left;
        const batch32 = {
          logProbs: tensor(raw.logp, [raw.b, raw.t]),
          oldLogProbs: tensor(raw.old, [raw.b, raw.t]),
          refLogProbs: tensor(raw.ref, [raw.b, raw.t]),
          mask: tensor(raw.mask, [raw.b, raw.t]),
          rewards: raw.rewards,
          groupIds: raw.groupIds,
        };
        const progress = { step: 10, totalSteps: 100 };
        const v32 = obj.right.loss(batch32, progress).loss;
        expect(v32.dtype).toBe('f32');
        const v64 = obj.right.loss(toBatch(raw), progress).loss.itemSync();
        // f32 rounding of inputs and sums; DisCO's penalty (beta 1e3) amplifies it, hence the loose bound
        expect(Math.abs(v32.itemSync() - v64)).toBeLessThanOrEqual(1e-3 * Math.max(1, Math.abs(v64)));
      }),
      { numRuns: 45 },
    );
  });

  it('a loss keeps only its result: disposing loss and metrics returns to the baseline (no leaked intermediates)', () => {
    const raw = {
      b: 3,
      t: 2,
      logp: [-1, -2, -0.5, -0.7, -0.2, -0.3],
      old: [-1, -1.5, -0.5, -1, -0.2, -0.1],
      ref: [-1, -1, -1, -1, -1, -1],
      mask: [1, 1, 1, 0, 1, 1],
      rewards: [1, 0, 1],
      groupIds: [0, 0, 0],
    };
    const batch = toBatch(raw);
    for (const name of OBJECTIVE_NAMES) {
      const obj = makeObjective(name);
      if (E.isLeft(obj)) throw obj.left;
      const before = liveTensors();
      const r = obj.right.loss(batch, { step: 1, totalSteps: 2 });
      dispose([r.loss, r.metrics]);
      expect(liveTensors(), name).toBe(before);
    }
  });

  it('leaves no tensors behind inside tidy', () => {
    const raw = {
      b: 2,
      t: 2,
      logp: [-1, -2, -0.5, -0.7],
      old: [-1, -1.5, -0.5, -1],
      ref: [-1, -1, -1, -1],
      mask: [1, 1, 1, 0],
      rewards: [1, 0],
      groupIds: [0, 0],
    };
    const before = liveTensors();
    tidy(() => {
      for (const name of OBJECTIVE_NAMES) {
        const obj = makeObjective(name);
        if (E.isRight(obj))
          valueAndGrad((lp: Tensor) => obj.right.loss(toBatch(raw, lp), { step: 1, totalSteps: 2 }).loss)(
            f64(raw.logp, [2, 2]),
          );
      }
      return null;
    });
    expect(liveTensors()).toBe(before);
  });

  it('selectRolloutRows keeps DAPO-kept rows; the loss on the sub-batch equals DAPO dynamic sampling on the full one', () => {
    fc.assert(
      fc.property(arbRaw(arbShape({ maxGroups: 4 }), { rewards: 'binary-any' }), (raw) => {
        const keep = dynamicSamplingKeep(raw.rewards, raw.groupIds);
        const rows = keep.flatMap((k, i) => (k ? [i] : []));
        fc.pre(rows.length > 0);
        const cfg = { ...GRPO_DEFAULTS, lossType: 'dapo' as const };
        const full = grpoLoss(toBatch(raw), { ...cfg, dynamicSampling: true }).loss.itemSync();
        const sub = grpoLoss(selectRolloutRows(toBatch(raw), rows), cfg).loss.itemSync();
        expectAllClose([full], [sub], 1e-12, 'loss');
      }),
      { numRuns: 30 },
    );
  });
});
