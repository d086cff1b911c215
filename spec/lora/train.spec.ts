import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { parseTrainConfig } from '../../src/training/config.js';
import { tinyRun } from '../training/helpers/tiny-run.js';
import { TINY_HUB_CONFIG, tinyHubDir } from '../hf/tiny-hub.js';

/**
 * LoRA through the trainer, on the project's own policy (a tiny run): the base stays bit for bit the model the seed
 * draws, only adapters train (the optimizer and the checkpoint hold them alone), the KL reference is the base with
 * the adapters off (no reference copy on disk), OUTPUT/adapter is peft's layout, and a LoRA run killed after a
 * checkpoint resumes exactly.
 */
const tmp = (tag: string): string => mkdtempSync(join(tmpdir(), `rlvr-lora-${tag}-`));
const LORA = { r: 4, alpha: 8, dropout: 0, targetModules: [...T.LORA_MODULES], useRslora: false };
/** A record without its timings (seconds, sample_seconds, tokens_per_s), which no two runs share. */
const untimed = (r: T.MetricRecord): Record<string, unknown> =>
  Object.fromEntries(Object.entries(r).filter(([k]) => !/seconds|per_s/.test(k)));
const mixedReward = T.withReward(T.additionTask(), (completion) => completion.length % 2);

describe('LoRA settings at the boundary', () => {
  it("takes peft names; defaults all-linear, alpha 32 and LoRA's RL learning rate; names a bad one", () => {
    const cli = parseTrainArgs(['--lora-r', '16', '--use-rslora']);
    expect(E.isRight(cli) && cli.right.lora).toEqual({
      r: 16,
      alpha: 32,
      dropout: 0,
      targetModules: [...T.LORA_MODULES],
      useRslora: true,
    });
    // Without --learning-rate LoRA's own; given, the user's; without LoRA the main job's.
    expect(E.isRight(cli) && cli.right.learningRate).toBe(T.LORA_LEARNING_RATE);
    const given = parseTrainArgs(['--lora-r', '1', '--learning-rate', '0.01']);
    expect(E.isRight(given) && given.right.learningRate).toBe(0.01);
    const plain = parseTrainArgs([]);
    expect(E.isRight(plain) && plain.right.learningRate).toBe(T.TRAIN_DEFAULTS.learningRate);
    expect(T.LORA_LEARNING_RATE).not.toBe(T.TRAIN_DEFAULTS.learningRate);
    // peft's own default targets stay available by name.
    const peftTargets = parseTrainArgs(['--lora-target-modules', 'q_proj,v_proj']);
    expect(E.isRight(peftTargets) && peftTargets.right.lora?.targetModules).toEqual(['q_proj', 'v_proj']);
    const peft = parseTrainConfig({ lora: { r: 4, lora_alpha: 16, target_modules: 'v_proj,q_proj' } as never });
    expect(E.isRight(peft) && peft.right.lora).toEqual({
      r: 4,
      alpha: 16,
      dropout: 0,
      targetModules: ['q_proj', 'v_proj'],
      useRslora: false,
    });
    // The command line names the flags typed (the config's fields are the library's names).
    const field = (argv: string[]): string | null => {
      const r = parseTrainArgs(argv);
      return E.isLeft(r) ? r.left.field : null;
    };
    expect(field(['--lora-r', '0'])).toBe('--lora-r');
    expect(field(['--lora-r', 'x'])).toBe('--lora-r');
    expect(field(['--lora-dropout', '1'])).toBe('--lora-dropout');
    expect(field(['--lora-target-modules', 'q_proj,lm_head'])).toBe('--lora-target-modules');
    expect(field(['--adapter', 'A', '--lora-r', '4'])).toBe('--lora-r');
    expect(field(['--merge-lora'])).toBe('--merge-lora');
    expect(field(['--merge-lora', '--lora-r', '4'])).toBe('--merge-lora');
    expect(field(['--merge-lora', '--lora-r', '4', '--model', 'M'])).toBe('--merge-lora');
    expect(field(['--merge-lora', '--lora-r', '4', '--model', 'M', '--output', 'O'])).toBeNull();
    // Output flags that cannot apply are refused, not ignored: OUTPUT/model is a --model run's, under LoRA a merge's.
    expect(field(['--save-dtype', 'bf16'])).toBe('--save-dtype');
    expect(field(['--save-dtype', 'bf16', '--model', 'M'])).toBe('--save-dtype');
    expect(field(['--save-dtype', 'bf16', '--model', 'M', '--output', 'O', '--lora-r', '4'])).toBe('--save-dtype');
    expect(field(['--save-dtype', 'bf16', '--model', 'M', '--output', 'O'])).toBeNull();
    expect(
      field(['--save-dtype', 'bf16', '--model', 'M', '--output', 'O', '--lora-r', '4', '--merge-lora']),
    ).toBeNull();
  });
});

describe('a LoRA training run', () => {
  it('on a new model: the warm-start trains every weight, RL only adapters on that base (bit-exact)', async () => {
    const out = tmp('run');
    const over = { objectiveOptions: { beta: 0.04 }, lora: LORA, outputDir: out, learningRate: 1e-2 };
    const cfg = tinyRun({ objective: 'grpo', ...over });
    const records: T.MetricRecord[] = [];
    const result = await T.train(cfg, { task: mixedReward, onRecord: (r) => records.push(r) });
    // The KL reference is the warm-started base with the adapters off: exactly the policy at RL's first step (B = 0),
    // then apart from it once the adapters move.
    const kl = records.filter((r) => r.phase === 'rl').map((r) => Number(r.kl));
    expect(kl[0]).toBe(0);
    expect(kl.at(-1)!).toBeGreaterThan(0);
    const backend = result.backend;
    // The same seed's warm-start without LoRA, stopped where RL would begin: the base LoRA RL must have trained on.
    const warm = await T.train(tinyRun({ ...cfg, lora: null, outputDir: null, steps: 0 }), { task: mixedReward });
    const seedModel = T.initParams(result.config, new T.Rng(cfg.seed), { backend });
    const base = T.treeLeaves(T.withoutLora(result.params));
    const warmed = T.treeLeaves(warm.params);
    const fresh = T.treeLeaves(seedModel);
    expect(base.length).toBe(fresh.length);
    for (let i = 0; i < base.length; i++) {
      // Every weight moved in the warm-start; none moved in RL.
      expect(warmed[i]!.dataSync()).not.toEqual(fresh[i]!.dataSync());
      expect(base[i]!.dataSync()).toEqual(warmed[i]!.dataSync());
    }
    // The adapters moved: some B is no longer zero.
    const bs = result.params.lora!.layers.flatMap((l) => Object.values(l).map((p) => p!.b.dataSync()));
    expect(bs.some((b) => b.some((x) => x !== 0))).toBe(true);

    // The checkpoint: adapters in peft's layout, their moments only, the base (a new model's) beside them.
    const ck = join(out, 'checkpoint');
    const files = readdirSync(ck).sort();
    expect(files).toEqual(
      [
        'adapter_config.json',
        'adapter_model.safetensors',
        'config.json',
        'manifest.json',
        'model.safetensors',
        'optimizer.safetensors',
        'trainer_state.json',
      ].sort(),
    );
    const opt = T.decodeSafetensors(readFileSync(join(ck, 'optimizer.safetensors')));
    if (E.isLeft(opt)) throw opt.left;
    const names = [...opt.right.tensors.keys()];
    const adapters = 1 * 7 * 2; // layers x modules x (A, B)
    expect(names).toHaveLength(2 * adapters);
    expect(
      names.every((n) => /^exp_avg(_sq)?\.base_model\.model\.model\.layers\.0\..*\.lora_[AB]\.weight$/.test(n)),
    ).toBe(true);
    // The KL reference is the base with the adapters off: no reference copy; the base is saved once as OUTPUT/base,
    // which the adapter names as its base model.
    expect(existsSync(join(out, 'reference'))).toBe(false);
    const saved = await T.loadCheckpoint(join(out, 'base'), { backend })();
    if (E.isLeft(saved)) throw saved.left;
    expect(T.treeLeaves(saved.right.params).map((t) => Array.from(t.dataSync()))).toEqual(
      warmed.map((t) => Array.from(t.dataSync())),
    );
    const adapterConfig = JSON.parse(readFileSync(join(out, 'adapter', 'adapter_config.json'), 'utf8'));
    expect(adapterConfig.base_model_name_or_path).toBe(join(out, 'base'));
    // OUTPUT/adapter: peft's files, which reload to the trained adapters.
    const back = await T.readAdapter(join(out, 'adapter'), result.config, backend);
    if (E.isLeft(back)) throw back.left;
    expect(back.right.config).toEqual(LORA);
    const trained = T.treeLeaves(result.params.lora);
    const reread = T.treeLeaves(back.right.lora);
    expect(reread.map((t) => Array.from(t.dataSync()))).toEqual(trained.map((t) => Array.from(t.dataSync())));
    T.dispose([seedModel, back.right.lora, warm.params, saved.right.params]);
  });

  it('killed after a checkpoint and resumed, it continues exactly as the uninterrupted run', async () => {
    const cfg = { objective: 'grpo' as const, steps: 4, checkpointEvery: 1, lora: LORA, learningRate: 1e-2 };
    const full: T.MetricRecord[] = [];
    await T.train(tinyRun({ ...cfg, outputDir: tmp('full') }), { task: mixedReward, onRecord: (r) => full.push(r) });
    const dir = tmp('killed');
    await expect(
      T.train(tinyRun({ ...cfg, outputDir: dir }), {
        task: mixedReward,
        onRecord: (r) => {
          if (r.phase === 'rl' && r.step === 3) throw new Error('killed');
        },
      }),
    ).rejects.toThrow('killed');
    const resumed: T.MetricRecord[] = [];
    await T.train(tinyRun({ ...cfg, outputDir: dir, resume: join(dir, 'checkpoint') }), {
      task: mixedReward,
      onRecord: (r) => resumed.push(r),
    });
    const pick = (rs: T.MetricRecord[]) =>
      rs.filter((r) => r.phase === 'rl' && r.step >= 3).map((r) => [r.step, r.grad_norm, r.reward, r.loss]);
    expect(pick(resumed)).toHaveLength(2);
    expect(pick(full).every(([, gradNorm]) => Number(gradNorm) > 0)).toBe(true);
    expect(pick(resumed)).toEqual(pick(full));
  });

  it('--overwrite replaces a finished LoRA run (its base and adapter are entries a run writes)', async () => {
    const out = tmp('overwrite');
    const cfg = tinyRun({ objective: 'grpo', steps: 1, lora: LORA, outputDir: out });
    await T.train(cfg, { task: mixedReward });
    expect(readdirSync(out)).toEqual(expect.arrayContaining(['adapter', 'base', 'checkpoint']));
    const again = await T.train({ ...cfg, overwrite: true }, { task: mixedReward });
    expect(again.params.lora).toBeDefined();
    await expect(T.train(cfg, { task: mixedReward })).rejects.toThrow(/is not empty|--overwrite/);
  });

  it('killed in the warm-start and resumed, it keeps the phase split and continues exactly', async () => {
    const cfg = { objective: 'grpo' as const, steps: 3, checkpointEvery: 1, lora: LORA, learningRate: 1e-2 };
    const full: T.MetricRecord[] = [];
    await T.train(tinyRun({ ...cfg, outputDir: tmp('full') }), { task: mixedReward, onRecord: (r) => full.push(r) });
    const dir = tmp('killed-warm');
    await expect(
      T.train(tinyRun({ ...cfg, outputDir: dir }), {
        task: mixedReward,
        onRecord: (r) => {
          if (r.phase === 'warmstart' && r.step === 2) throw new Error('killed');
        },
      }),
    ).rejects.toThrow('killed');
    // The warm-start's checkpoint is a full one (every weight and its moments): no adapter yet.
    expect(existsSync(join(dir, 'checkpoint', 'adapter_config.json'))).toBe(false);
    const resumed: T.MetricRecord[] = [];
    const result = await T.train(tinyRun({ ...cfg, outputDir: dir, resume: join(dir, 'checkpoint') }), {
      task: mixedReward,
      onRecord: (r) => resumed.push(r),
    });
    expect(result.params.lora).toBeDefined();
    const pick = (rs: T.MetricRecord[]) => rs.filter((r) => r.phase !== 'warmstart' || r.step >= 2).map(untimed);
    expect(pick(resumed).length).toBeGreaterThan(4);
    expect(pick(resumed)).toEqual(pick(full));
  });

  it('a full checkpoint at RL step 0 starts LoRA RL exactly as the uninterrupted LoRA run does', async () => {
    const cfg = { objective: 'grpo' as const, steps: 3, lora: LORA, learningRate: 1e-2 };
    const whole: T.MetricRecord[] = [];
    await T.train(tinyRun({ ...cfg, outputDir: tmp('whole') }), { task: mixedReward, onRecord: (r) => whole.push(r) });
    // One warm-start (full fine-tuning, RL step 0), then LoRA RL from it.
    const warm = tmp('warm');
    await T.train(tinyRun({ ...cfg, lora: null, steps: 0, outputDir: warm }), { task: mixedReward });
    const branched: T.MetricRecord[] = [];
    const out = tmp('branch');
    await T.train(tinyRun({ ...cfg, outputDir: out, resume: join(warm, 'checkpoint') }), {
      task: mixedReward,
      onRecord: (r) => branched.push(r),
    });
    const rl = (rs: T.MetricRecord[]) => rs.filter((r) => r.phase === 'rl').map(untimed);
    expect(rl(branched)).toHaveLength(3);
    expect(rl(branched)).toEqual(rl(whole));
    // Past RL step 0 a full checkpoint is full fine-tuning's: LoRA does not take it over.
    const fullRl = tmp('full-rl');
    await T.train(tinyRun({ ...cfg, lora: null, steps: 1, outputDir: fullRl }), { task: mixedReward });
    await expect(
      T.train(tinyRun({ ...cfg, resume: join(fullRl, 'checkpoint') }), { task: mixedReward }),
    ).rejects.toThrow(/resume: lora differs: the checkpoint has "full fine-tuning", the command "LoRA adapters"/);
  });

  it('refuses to resume a LoRA checkpoint as full fine-tuning, or with other adapters, naming the field', async () => {
    const dir = tmp('mismatch');
    await T.train(tinyRun({ objective: 'grpo', steps: 1, lora: LORA, outputDir: dir }), { task: mixedReward });
    const resume = join(dir, 'checkpoint');
    await expect(T.train(tinyRun({ objective: 'grpo', steps: 2, resume }), { task: mixedReward })).rejects.toThrow(
      /resume: lora differs/,
    );
    await expect(
      T.train(tinyRun({ objective: 'grpo', steps: 2, resume, lora: { ...LORA, r: 2 } }), { task: mixedReward }),
    ).rejects.toThrow(/resume: lora\.r differs: the checkpoint has 4, the command 2/);
  });
});

describe('gradient checkpointing through the trainer', () => {
  it('trains the same policy as without it, to rounding (LoRA and full fine-tuning)', async () => {
    for (const lora of [LORA, null]) {
      const runs = await Promise.all(
        [false, true].map(async (gradientCheckpointing) => {
          const records: T.MetricRecord[] = [];
          await T.train(tinyRun({ objective: 'grpo', steps: 2, lora, gradientCheckpointing }), {
            task: mixedReward,
            onRecord: (r) => records.push(r),
          });
          return records.filter((r) => r.phase !== 'eval').map((r) => Number(r.grad_norm));
        }),
      );
      expect(runs[1]).toHaveLength(runs[0]!.length);
      runs[0]!.forEach((g, i) => expect(Math.abs(runs[1]![i]! - g)).toBeLessThanOrEqual(1e-4 * Math.abs(g)));
    }
  });
});

describe('LoRA on a Hub model', () => {
  /** The tiny Qwen3-layout Hub directory, its weights stored in bf16 as real checkpoints ship. */
  async function bf16HubDir(): Promise<string> {
    const dir = await tinyHubDir();
    const cpu = new T.CpuBackend({ threads: 1 });
    const loaded = await T.loadHfCheckpoint(dir, cpu)();
    if (E.isLeft(loaded)) throw loaded.left;
    const extraConfig = { eos_token_id: 258, bos_token_id: null };
    const saved = await T.saveHfCheckpoint(dir, loaded.right.params, TINY_HUB_CONFIG, { dtype: 'bf16', extraConfig })();
    if (E.isLeft(saved)) throw saved.left;
    T.dispose(loaded.right.params);
    return dir;
  }
  const hubRun = (model: string, over: Partial<T.TrainConfig>) =>
    tinyRun({
      modelDir: model,
      objective: 'grpo',
      objectiveOptions: { beta: 0.04 },
      steps: 1,
      promptsPerStep: 2,
      numGenerations: 2,
      maxCompletionLength: 4,
      evalPrompts: 2,
      evalK: 1,
      ...over,
    });

  it('continues from a saved adapter (--adapter with --model): the run starts from its weights', async () => {
    const model = await tinyHubDir();
    const first = tmp('first');
    const a = await T.train(
      hubRun(model, { steps: 2, lora: LORA, outputDir: first, learningRate: 1e-2, warmStartSteps: 0 }),
    );
    // No steps: the policy is the adapter as loaded, on the same Hub model.
    const b = await T.train(hubRun(model, { steps: 0, warmStartSteps: 0, adapter: join(first, 'adapter') }));
    const want = T.treeLeaves(a.params.lora).map((t) => Array.from(t.dataSync()));
    expect(want.some((x) => x.some((v) => v !== 0))).toBe(true);
    expect(T.treeLeaves(b.params.lora).map((t) => Array.from(t.dataSync()))).toEqual(want);
    expect(b.params.lora!.scaling).toBe(a.params.lora!.scaling);
    // Without --model there is no base it was trained on; with --resume the checkpoint holds the adapters.
    const field = (over: Partial<T.TrainConfig>): string | null => {
      const c = parseTrainConfig({ adapter: join(first, 'adapter'), ...over });
      return E.isLeft(c) ? c.left.field : null;
    };
    expect(field({})).toBe('adapter');
    expect(field({ modelDir: model, resume: join(first, 'checkpoint') })).toBe('adapter');
    expect(field({ modelDir: model })).toBeNull();
  });

  it('keeps the frozen matrices in bf16, holds under 1/4 of full fine-tuning, and --merge-lora exports the merge', async () => {
    const model = await bf16HubDir();
    const held = async (lora: T.LoraConfig | null, out: string | null) => {
      const backend = new T.CpuBackend({ threads: 1 });
      let bytes = 0;
      const result = await T.train(hubRun(model, { lora, outputDir: out, mergeLora: lora !== null && out !== null }), {
        backend,
        task: mixedReward,
        // After the RL step: the policy, its optimizer state and the reference, as the run holds them.
        onRecord: (r) => {
          if (r.phase === 'rl') bytes = backend.memory().bytes;
        },
      });
      return { result, bytes, backend };
    };
    const full = await held(null, null);
    const out = tmp('hub');
    const lora = await held({ ...LORA, r: 1, targetModules: ['q_proj', 'v_proj'] }, out);
    expect(full.result.params.layers[0]!.wq.dtype).toBe('f32');
    const p = lora.result.params;
    expect([p.embed.weight.dtype, p.layers[0]!.wq.dtype, p.layers[0]!.wDown.dtype]).toEqual(['bf16', 'bf16', 'bf16']);
    expect(p.layers[0]!.attnNorm.dtype).toBe('f32');
    expect(p.lora!.layers[0]!.q_proj!.a.dtype).toBe('f32');
    expect(lora.bytes).toBeGreaterThan(0);
    expect(lora.bytes).toBeLessThanOrEqual(full.bytes / 4);

    // The merged export loads through the Hub loader to the adapted model's logits (1e-5 of the largest).
    const merged = await T.loadHfCheckpoint(join(out, 'model'), lora.backend)();
    if (E.isLeft(merged)) throw merged.left;
    const tokens = T.tensor(new Int32Array([256, 72, 101, 108, 108, 111, 257]), [1, 7], {
      dtype: 'i32',
      backend: lora.backend,
    });
    const a = T.forward(p, TINY_HUB_CONFIG, tokens).dataSync();
    const b = T.forward(merged.right.params, TINY_HUB_CONFIG, tokens).dataSync();
    const scale = Math.max(...Array.from(a, Math.abs));
    for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(1e-5 * scale);
    // The adapters trained: the merge is not the base.
    const base = await T.loadHfCheckpoint(model, lora.backend)();
    if (E.isLeft(base)) throw base.left;
    const c = T.forward(base.right.params, TINY_HUB_CONFIG, tokens).dataSync();
    expect(Math.max(...Array.from(a, (x, i) => Math.abs(x - c[i]!)))).toBeGreaterThan(0);
    const adapter = await T.readAdapter(join(out, 'adapter'), TINY_HUB_CONFIG, lora.backend);
    expect(E.isRight(adapter)).toBe(true);
  });
});
