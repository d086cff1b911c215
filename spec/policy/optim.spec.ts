import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { tidy } from '../../src/core/scope.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { randn } from '../../src/ops/creation.js';
import { adamwInit, adamwScheduleValues, adamwStep, type AdamWConfig } from '../../src/nn/optim.js';
import { adamwUpdateMany } from '../../src/ops/optim.js';
import { tensor } from '../../src/ops/creation.js';
import type { Backend } from '../../src/core/backend.js';
import { ReferenceBackend } from '../../src/backends/reference/index.js';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { lrAt, type LrSchedule } from '../../src/nn/schedule.js';
import { liveTensors } from '../../src/core/tensor.js';
import { initRun, trainStep } from './helpers/resume-run.js';

/** PyTorch's AdamW (with clip_grad_norm_ first) as plain loops over numbers. */
function reference(
  params: number[][],
  gradsPerStep: number[][][],
  cfg: Required<Omit<AdamWConfig, 'schedule' | 'decay' | 'maxGradNorm'>> & {
    maxGradNorm?: number;
    decayMask: boolean[];
  },
): number[][] {
  const p = params.map((x) => [...x]);
  const m = params.map((x) => x.map(() => 0));
  const v = params.map((x) => x.map(() => 0));
  gradsPerStep.forEach((grads, s) => {
    const step = s + 1;
    const norm = Math.sqrt(grads.flat().reduce((a, g) => a + g * g, 0));
    const scale = cfg.maxGradNorm === undefined ? 1 : Math.min(1, cfg.maxGradNorm / (norm + 1e-6));
    p.forEach((leaf, li) => {
      leaf.forEach((_, i) => {
        const g = grads[li]![i]! * scale;
        m[li]![i] = cfg.beta1 * m[li]![i]! + (1 - cfg.beta1) * g;
        v[li]![i] = cfg.beta2 * v[li]![i]! + (1 - cfg.beta2) * g * g;
        const mhat = m[li]![i]! / (1 - cfg.beta1 ** step);
        const vhat = v[li]![i]! / (1 - cfg.beta2 ** step);
        const wd = cfg.decayMask[li] ? cfg.weightDecay : 0;
        leaf[i] = leaf[i]! * (1 - cfg.lr * wd) - (cfg.lr * mhat) / (Math.sqrt(vhat) + cfg.eps);
      });
    });
  });
  return p;
}

describe('AdamW over a pytree', () => {
  it.each([[undefined], [0.5], [1e6]])('matches a plain-loop reference (f64, maxGradNorm %s)', (maxGradNorm) => {
    const rng = new Rng(4);
    const params = { w: randn([3, 4], rng, { dtype: 'f64' }), norm: randn([4], rng, { dtype: 'f64' }) };
    const cfg = {
      lr: 0.01,
      beta1: 0.9,
      beta2: 0.95,
      eps: 1e-8,
      weightDecay: 0.1,
      ...(maxGradNorm !== undefined ? { maxGradNorm } : {}),
    };
    const gradsPerStep = Array.from({ length: 4 }, () => ({
      w: randn([3, 4], rng, { dtype: 'f64' }),
      norm: randn([4], rng, { dtype: 'f64' }),
    }));
    let p = params;
    let state = adamwInit(p);
    for (const g of gradsPerStep) {
      const out = tidy(() => adamwStep(p, g, state, cfg));
      p = out.params;
      state = out.state;
    }
    expect(state.step).toBe(4);
    // treeLeaves order is sorted keys: norm (rank 1, not decayed), then w (decayed).
    const asNumbers = (t: object): number[][] => treeLeaves(t).map((x) => Array.from(x.dataSync()));
    const expected = reference(asNumbers(params), gradsPerStep.map(asNumbers), { ...cfg, decayMask: [false, true] });
    asNumbers(p).forEach((leaf, li) => leaf.forEach((x, i) => expect(x).toBeCloseTo(expected[li]![i]!, 12)));
  });

  it('reports the pre-clipping global gradient norm and the scheduled learning rate', () => {
    const rng = new Rng(5);
    const params = { a: randn([5], rng, { dtype: 'f64' }), b: randn([2, 2], rng, { dtype: 'f64' }) };
    const grads = { a: randn([5], rng, { dtype: 'f64' }), b: randn([2, 2], rng, { dtype: 'f64' }) };
    const norm = Math.sqrt(
      treeLeaves(grads)
        .flatMap((t) => Array.from(t.dataSync()))
        .reduce((s, g) => s + g * g, 0),
    );
    const schedule: LrSchedule = { peakLr: 1e-3, warmupSteps: 10, totalSteps: 100 };
    const out = tidy(() => adamwStep(params, grads, adamwInit(params), { lr: 123, maxGradNorm: 0.1, schedule }));
    expect(out.gradNorm.itemSync()).toBeCloseTo(norm, 12);
    expect(out.lr).toBe(lrAt(schedule, 0));
  });
});

describe("AdamW's step values as a device tensor (adamwStep's schedule)", () => {
  const cfg: AdamWConfig = {
    lr: 0,
    weightDecay: 0.1,
    maxGradNorm: 1,
    schedule: { peakLr: 0.03, warmupSteps: 3, totalSteps: 10 },
  };
  /** Four steps on `backend`, each step's values from the host (uniforms) or from a schedule tensor. */
  const run = (backend: Backend, scheduled: boolean) => {
    const rng = new Rng(8);
    let p = { w: randn([5, 3], rng, { backend }), norm: randn([3], rng, { backend }) };
    let state = adamwInit(p);
    for (let s = 0; s < 4; s++) {
      const g = { w: randn([5, 3], rng, { backend }), norm: randn([3], rng, { backend }) };
      const out = tidy(() => {
        const schedule = scheduled ? tensor(adamwScheduleValues(state.step, cfg), [4], { backend }) : undefined;
        // With a schedule the host's lr is nonsense: the kernel must read the tensor's.
        return schedule
          ? adamwStep(p, g, state, { ...cfg, schedule: undefined, lr: 123 }, { schedule })
          : adamwStep(p, g, state, cfg);
      });
      p = out.params;
      state = out.state;
    }
    return treeLeaves(p).map((t) => Array.from(t.dataSync()));
  };

  it('the cpu kernel reads the same f32 values from the tensor as from its arguments: the same step bit for bit', () => {
    const cpu = new CpuBackend();
    expect(run(cpu, true)).toEqual(run(cpu, false));
    cpu.dispose();
  });

  it('the reference kernel takes them rounded to f32: within that rounding of the f64 step', () => {
    const ref = new ReferenceBackend();
    const [got, want] = [run(ref, true), run(ref, false)];
    got.forEach((leaf, l) => leaf.forEach((x, i) => expect(x).toBeCloseTo(want[l]![i]!, 6)));
  });

  it('refuses a schedule of another shape or dtype, and two different nonzero weight decays', () => {
    const ref = new ReferenceBackend();
    const rng = new Rng(9);
    const [p, g] = [randn([4], rng, { backend: ref }), randn([4], rng, { backend: ref })];
    const hyper = { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, step: 1, weightDecays: [0.1, 0.2] };
    const bad = tensor([1, 2, 3], [3], { backend: ref });
    const good = tensor([1, 2, 3, 4], [4], { backend: ref });
    expect(() => adamwUpdateMany([p], [g], [p], [p], null, { ...hyper, weightDecays: [0.1], schedule: bad })).toThrow(
      /the schedule must be f32 \[4\], got f32 \[3\]/,
    );
    expect(() => adamwUpdateMany([p, p], [g, g], [p, p], [p, p], null, { ...hyper, schedule: good })).toThrow(
      /one nonzero weight decay at most, got 0.1, 0.2/,
    );
  });
});

describe('warmup + cosine learning-rate schedule', () => {
  const s: LrSchedule = { peakLr: 1e-3, warmupSteps: 10, totalSteps: 110, minLr: 1e-4 };

  it('warms up linearly to the peak, then decays by a half cosine to the floor and stays there', () => {
    expect(lrAt(s, 0)).toBeCloseTo(1e-4, 15);
    expect(lrAt(s, 4)).toBeCloseTo(5e-4, 15);
    expect(lrAt(s, 9)).toBeCloseTo(1e-3, 15);
    expect(lrAt(s, 10)).toBeCloseTo(1e-3, 15);
    expect(lrAt(s, 60)).toBeCloseTo((1e-3 + 1e-4) / 2, 15);
    expect(lrAt(s, 110)).toBeCloseTo(1e-4, 15);
    expect(lrAt(s, 500)).toBeCloseTo(1e-4, 15);
  });

  it('is increasing during warmup, non-increasing after, and within [minLr, peak]', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 200 }), (step) => {
        const lr = lrAt(s, step);
        expect(lr).toBeGreaterThan(0);
        expect(lr).toBeLessThanOrEqual(s.peakLr * (1 + 1e-12));
        if (step < s.warmupSteps - 1) expect(lrAt(s, step + 1)).toBeGreaterThan(lr);
        if (step >= s.warmupSteps) {
          expect(lr).toBeGreaterThanOrEqual(s.minLr! * (1 - 1e-12));
          expect(lrAt(s, step + 1)).toBeLessThanOrEqual(lr);
        }
      }),
    );
  });

  it('rejects an inconsistent schedule', () => {
    expect(() => lrAt({ peakLr: 1, warmupSteps: 10, totalSteps: 5 }, 0)).toThrow(/warmupSteps/);
  });
});

describe('a full training step (sampling, scoring, backward, AdamW)', () => {
  it('leaves no tensor behind once the old state is disposed', async () => {
    let state = (await trainStep(initRun(1))).next;
    const before = liveTensors();
    for (let i = 0; i < 3; i++) state = (await trainStep(state)).next;
    expect(liveTensors()).toBe(before);
  });
});
