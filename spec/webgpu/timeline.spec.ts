import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { adamwInit, adamwStep, initParams, smallConfig, type TransformerParams } from '../../src/nn/index.js';
import { sftBatch, sftExamples, sftLoss } from '../../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor } from '../../src/tasks/index.js';
import { TRAIN_DEFAULTS } from '../../src/training/index.js';
import { bufferOf } from '../../src/backends/webgpu/storage.js';
import { copyProgram } from '../../src/backends/webgpu/kernels/movement.js';
import { dawnToggles } from '../../src/backends/webgpu/platform.js';
import { gpuSpan } from '../../src/backends/webgpu/timeline.js';
import { describeGpu } from './helpers.js';

/**
 * The step timeline (`timeline.ts`) and the batching settings it is used to compare: its arithmetic on known
 * timestamps; on the device, a step's counts equal the runtime's counters, one compute pass per submit, host
 * times that add up; error scopes held across submits still catch an invalid dispatch and name it; Dawn's fast
 * toggles give the same losses.
 */
describe('gpuSpan: busy time and gaps from pass timestamps', () => {
  it('sums pass lengths and splits the gaps by submit (closed form)', () => {
    // Passes [0,10] and [12,20] in submit 0, [50,60] in submit 1, [58,57] (a clock that went back) in submit 1.
    const t = new BigUint64Array([0n, 10_000_000n, 12_000_000n, 20_000_000n, 50_000_000n, 60_000_000n, 58n, 57n]);
    const s = gpuSpan(t.subarray(0, 6), [0, 0, 1]);
    expect(s).toEqual({ busyMs: 28, spanMs: 60, idleInSubmitMs: 2, idleBetweenSubmitsMs: 30, measuredPasses: 3 });
    const odd = gpuSpan(t, [0, 0, 1, 1]);
    expect(odd.busyMs).toBe(28);
    expect(odd.idleInSubmitMs).toBe(2);
  });
});

describe('Dawn toggles', () => {
  it('timestamps are never quantized; the fast and f16 toggles only when asked for', () => {
    expect(dawnToggles({ fast: false, forceF16: false })).toEqual({ enable: [], disable: ['timestamp_quantization'] });
    expect(dawnToggles({ fast: true, forceF16: true }).enable).toEqual([
      'skip_validation',
      'disable_robustness',
      'vulkan_enable_f16_on_nvidia',
    ]);
  });
});

const task = additionTask();
const tok = tokenizerFor(task);
const config = smallConfig(tok.vocabSize, { ...TRAIN_DEFAULTS.model });
const batch = sftBatch(tok, sftExamples(task, sampleProblems(task, 8, new T.Rng(1))));

/** Losses of `steps` SFT steps from the same start; `around(step, run)` wraps each step (a timeline, say). */
async function losses(
  backend: T.Backend,
  steps: number,
  around: (run: () => Promise<number>) => Promise<number> = (run) => run(),
): Promise<number[]> {
  let params: TransformerParams = initParams(config, new T.Rng(0), { backend });
  let opt = adamwInit(params);
  const out: number[] = [];
  for (let s = 0; s < steps; s++) {
    out.push(
      await around(async () => {
        const next = T.tidy(() => {
          const [loss, grads] = T.valueAndGrad((p: TransformerParams) => sftLoss(p, config, batch))(params);
          const stepped = adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 });
          return { params: stepped.params, opt: stepped.state, loss };
        });
        T.dispose([params, opt]);
        params = next.params;
        opt = next.opt;
        const loss = await next.loss.item();
        next.loss.dispose();
        return loss;
      }),
    );
  }
  T.dispose([params, opt]);
  return out;
}

describeGpu('webgpu step timeline', (gpu) => {
  it("a step's timeline: the runtime's counts, one pass per submit, host times inside the wall time", async () => {
    await losses(gpu, 2); // warm: pipelines, bind groups, the pool
    let before = gpu.stats();
    let after = before;
    let report: T.TimelineReport | null = null;
    await losses(gpu, 1, async (run) => {
      gpu.runtime.startTimeline(); // submits what was encoded before (the initialization)
      before = gpu.stats();
      const loss = await run();
      report = await gpu.runtime.stopTimeline();
      after = gpu.stats();
      return loss;
    });
    const r = report! as T.TimelineReport;
    expect(r.dispatches).toBe(after.dispatches - before.dispatches);
    // The timeline's own read-back (the device's side, where it has timestamps) is a submit of its own.
    const ownSubmits = r.gpu === null ? 0 : 1;
    expect(r.submits).toBe(after.submits - before.submits - ownSubmits);
    expect(r.submits).toBeGreaterThan(1);
    expect(r.reads).toBe(1);
    // Dispatches go into one pass per submit (a read's copy ends one; this step reads only at its end).
    expect(r.passes).toBe(r.submits);
    expect(r.encodeMs).toBeGreaterThan(0);
    expect(r.encodeMs + r.submitMs).toBeLessThanOrEqual(r.untilLastSubmitMs + 1e-6);
    // The longest submit is one of them: at least their mean, at most their sum.
    expect(r.longestSubmitMs).toBeGreaterThanOrEqual(r.submitMs / r.submits - 1e-9);
    expect(r.longestSubmitMs).toBeLessThanOrEqual(r.submitMs + 1e-9);
    expect(r.untilLastSubmitMs).toBeLessThanOrEqual(r.wallMs);
    expect(r.readWaitMs).toBeLessThanOrEqual(r.wallMs);
    if (gpu.runtime.device.features.has('timestamp-query')) {
      expect(r.gpu!.busyMs).toBeGreaterThan(0);
      expect(r.gpu!.busyMs).toBeLessThanOrEqual(r.gpu!.spanMs + 1e-9);
      expect(r.gpu!.measuredPasses).toBe(r.passes);
    } else {
      expect(r.gpu).toBeNull();
      expect(r.gpuNote).toBe('the device has no timestamp-query');
    }
  });

  it('fewer submits, error scopes per read or per submit (the default): the same losses; an invalid dispatch is still caught and named', async () => {
    const want = await losses(gpu, 2);
    const b = await T.createWebGpuBackend({ dispatchesPerSubmit: 1_000_000, errorScopes: 'submit' });
    const s0 = b.stats();
    expect(await losses(b, 2)).toEqual(want);
    // Two steps, each submitted once, at its read (initialization's uploads submit nothing).
    expect(b.stats().submits - s0.submits).toBe(2);
    b.dispose();
    for (const scopes of ['read', 'submit'] as const) {
      // A fresh device (Dawn shares a pipeline between identical descriptors, under the first one's label), with
      // validation whatever RLVR_WEBGPU_FAST says: the dispatch below is invalid on purpose.
      const c = await T.createWebGpuBackend({ errorScopes: scopes, fast: false });
      const x = T.tensor([1, 2, 3, 4], [4], { backend: c });
      T.neg(x).dispose(); // a valid dispatch in the same span
      c.runtime.flush(); // a submit: per read, the scopes stay open across it; per submit, they close here
      c.runtime.dispatch({
        kernel: 'copy_with_bad_uniform',
        key: 'copy:r1',
        bindings: copyProgram(1).bindings,
        source: () => copyProgram(1).source, // a valid shader with a 112-byte uniform
        buffers: [bufferOf(x.storageFor('test')), c.runtime.alloc(16)],
        uniforms: new Uint32Array(4),
        workgroups: [1, 1, 1],
      });
      c.runtime.flush();
      const err = await x.data().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(T.GpuValidationError);
      expect((err as T.GpuValidationError).kernel).toMatch(/copy_with_bad_uniform/);
      c.dispose();
    }
  });

  it("Dawn's fast toggles (no validation, no robustness) give the same losses", async () => {
    const want = await losses(gpu, 2);
    const b = await T.createWebGpuBackend({ fast: true });
    expect(b.adapter.toggles).toContain('skip_validation');
    expect(await losses(b, 2)).toEqual(want);
    b.dispose();
  });
});
