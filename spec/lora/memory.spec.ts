import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { MemoryError } from '../../src/training/memory.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * The memory estimate is an upper bound of what the CPU backend carves: runs given a backend that holds exactly
 * their estimate (full fine-tuning and LoRA, with and without gradient checkpointing, with a KL reference) finish
 * without running out; a backend one byte short refuses them before anything is allocated, naming its limit and
 * what would fit. And LoRA's bytes: a 0.6B-shaped model with LoRA holds at most a quarter of full fine-tuning's.
 */
const LORA = { r: 8, alpha: 16, dropout: 0, targetModules: [...T.LORA_MODULES], useRslora: false };
const task = T.withReward(T.additionTask(), (completion) => completion.length % 2);
const shape = {
  model: { dModel: 96, nLayers: 3, nHeads: 4, nKvHeads: 2, dFf: 256, maxSeqLen: 40 },
  warmStartSteps: 2,
  warmStartBatchSize: 16,
  steps: 3,
  promptsPerStep: 4,
  numGenerations: 4,
  maxCompletionLength: 12,
  evalPrompts: 8,
  evalK: 2,
  objective: 'grpo' as const,
  objectiveOptions: { beta: 0.04 },
};

describe('the memory estimate on the cpu backend', () => {
  it.each([
    ['full fine-tuning', null, false],
    ['full fine-tuning, checkpointed', null, true],
    ['LoRA', LORA, false],
    ['LoRA, checkpointed', LORA, true],
  ] as const)('bounds what a run carves: %s', async (_, lora, gradientCheckpointing) => {
    const cfg = tinyRun({ ...shape, lora, gradientCheckpointing });
    let estimate: T.MemoryEstimate | null = null;
    const probe = new T.CpuBackend({ threads: 2, memoryLimitBytes: 1 });
    await expect(T.train(cfg, { backend: probe, task, onMemoryEstimate: (e) => (estimate = e) })).rejects.toThrow(
      MemoryError,
    );
    probe.dispose();
    const total = Math.ceil(estimate!.total);
    // One byte short: refused before anything is allocated, naming the limit.
    const short = new T.CpuBackend({ threads: 2, memoryLimitBytes: total - 1 });
    const refused = await T.train(cfg, { backend: short, task }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MemoryError);
    expect((refused as Error).message).toContain("the cpu backend's memoryLimitBytes");
    expect(short.poolStats().heapBytes).toBe(0);
    short.dispose();
    // Exactly the estimate: the run finishes, every step of it.
    const exact = new T.CpuBackend({ threads: 2, memoryLimitBytes: total });
    const records: T.MetricRecord[] = [];
    const result = await T.train(cfg, { backend: exact, task, onRecord: (r) => records.push(r) });
    expect(records.filter((r) => r.phase === 'rl')).toHaveLength(3);
    expect(exact.poolStats().heapBytes).toBeLessThanOrEqual(total);
    T.dispose(result.params);
    exact.dispose();
  });

  it('counts the held-out evaluation: prompts x k rows at once (issue 26 item 13: 2.2 GB against 163 MiB)', async () => {
    // 10 prompts x 1000 samples: the evaluation's rows outnumber a step's 16 by far.
    const cfg = tinyRun({
      ...shape,
      objectiveOptions: {},
      steps: 1,
      evalPrompts: 10,
      evalK: 1000,
      maxCompletionLength: 4,
    });
    let estimate: T.MemoryEstimate | null = null;
    const probe = new T.CpuBackend({ threads: 2, memoryLimitBytes: 1 });
    await T.train(cfg, { backend: probe, task, onMemoryEstimate: (e) => (estimate = e) }).catch(() => null);
    probe.dispose();
    const exact = new T.CpuBackend({ threads: 2, memoryLimitBytes: Math.ceil(estimate!.total) });
    const result = await T.train(cfg, { backend: exact, task });
    expect(exact.poolStats().heapBytes).toBeGreaterThan(estimate!.total / 3);
    T.dispose(result.params);
    exact.dispose();
  });

  it('a refusal names what would fit, with its estimate', async () => {
    const cfg = tinyRun({ ...shape, promptsPerStep: 16, numGenerations: 8, maxCompletionLength: 24 });
    let estimate: T.MemoryEstimate | null = null;
    const probe = new T.CpuBackend({ threads: 1, memoryLimitBytes: 1 });
    await T.train(cfg, { backend: probe, task, onMemoryEstimate: (e) => (estimate = e) }).catch(() => null);
    probe.dispose();
    const tight = new T.CpuBackend({ threads: 1, memoryLimitBytes: Math.floor(estimate!.total * 0.7) });
    const e = await T.train(cfg, { backend: tight, task }).catch((x: unknown) => x);
    tight.dispose();
    expect(e).toBeInstanceOf(MemoryError);
    const m = (e as MemoryError).message;
    expect(m).toMatch(/What would fit: .*--gradient-checkpointing \([\d.]+ MiB\)/);
    expect(m).toMatch(/--groups-per-minibatch \d+ \([\d.]+ MiB\)/);
    expect((e as MemoryError).alternatives.length).toBeGreaterThanOrEqual(2);
    expect(m).toMatch(/activations [\d.]+ MiB/);
  });
});

describe("LoRA's bytes", () => {
  it('a Qwen3-0.6B-shaped model with LoRA (r 16, all linear) holds at most 1/4 of full fine-tuning', () => {
    // Qwen3-0.6B's config.json: hidden 1024, 28 layers, 16 heads of 128, 8 key/value heads, MLP 3072, vocab 151936.
    const qwen3: T.TransformerConfig = {
      vocabSize: 151_936,
      dModel: 1024,
      nLayers: 28,
      nHeads: 16,
      nKvHeads: 8,
      headDim: 128,
      dFf: 3072,
      maxSeqLen: 40_960,
      ropeTheta: 1_000_000,
      rmsEps: 1e-6,
      qkNorm: true,
      tieEmbeddings: true,
    };
    expect(T.countParameters(qwen3)).toBe(596_049_920);
    const run = {
      sampledRows: 16,
      minibatchRows: 4,
      promptTokens: 40,
      completionTokens: 64,
      withReference: false,
    };
    const full = T.estimateTrainingMemory(qwen3, run);
    const lora = T.estimateTrainingMemory(qwen3, {
      ...run,
      lora: { r: 16, targetModules: T.LORA_MODULES },
      frozenBytesPerParameter: 2,
      remat: true,
    });
    // peft's count for Qwen3-0.6B, r 16, all-linear: 10,092,544 trainable parameters.
    expect(lora.trainableParameters).toBe(10_092_544);
    expect(lora.total).toBeLessThanOrEqual(full.total / 4);
    expect(lora.total).toBeLessThan(4 * 2 ** 30);
  });
});
