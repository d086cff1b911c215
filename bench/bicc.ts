/**
 * The cost of BICC per training step beside the plain step: the training forward + backward of GRPO on one
 * rollout batch (8 prompts x G = 8 two-digit additions sampled from an init policy, default small model), on
 * the plain context and on the conditioned one. Reports tokens processed (padded B x (P + C), and real) and
 * seconds per step. Run: npx vite-node bench/bicc.ts (or `node esbuild.config.mjs && node dist/bench/bicc.js`).
 */
import * as E from 'fp-ts/lib/Either.js';
import { Bench } from 'tinybench';
import { dispose, objectives, Rng, tensor, tidy, valueAndGrad, type Tensor } from '../src/index.js';
import { initParams, smallConfig, type TransformerParams } from '../src/nn/index.js';
import {
  biccInput,
  biccLogProbs,
  conditionBatch,
  sampleRollouts,
  scoreLogProbs,
  seqLen,
  type ConditionedBatch,
  type SequenceBatch,
} from '../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor } from '../src/tasks/index.js';

const task = additionTask();
const tok = tokenizerFor(task);
const config = smallConfig(tok.vocabSize);
const params = initParams(config, new Rng(0));
const rng = new Rng(1);
const G = 8;
const problems = sampleProblems(task, 8, rng);
const ro = await sampleRollouts(
  params,
  config,
  tok,
  problems.map((p) => p.prompt),
  rng,
  { groupSize: G, maxNewTokens: 8 },
);

// An init policy solves nothing, so verifier rewards alone would leave every group single-class (BICC would then
// cost nothing). Keep the verifier's positives and make group i have at least i + 1 positives (capped at G - 1):
// N+ then ranges over 1..7, as in a run where some prompts are easy and some hard.
const verified = ro.completions.map((text, r) => task.verify(text, problems[ro.promptIndex[r]!]!));
const rewards = verified.map((v, r) => (v > 0 || r % G <= Math.min(ro.promptIndex[r]!, G - 2) ? 1 : 0));
const parsed = objectives.makeObjective('grpo');
if (E.isLeft(parsed)) throw parsed.left;
const grpo = parsed.right;
const b = ro.batchSize;
const c = ro.completionLen;

function step(score: (p: TransformerParams) => Tensor, r: readonly number[]): void {
  tidy(() => {
    const f = (p: TransformerParams): Tensor =>
      grpo.loss({
        logProbs: score(p),
        oldLogProbs: tensor(ro.sampledLogProbs, [b, c]),
        mask: tensor(ro.completionMask, [b, c]),
        rewards: r,
        groupIds: ro.promptIndex,
      }).loss;
    const [loss, grads] = valueAndGrad(f)(params);
    dispose([loss, grads]);
  });
}

const tokens = (s: SequenceBatch): { padded: number; real: number } => ({
  padded: s.batchSize * seqLen(s),
  real: s.attentionMask.reduce((a, m) => a + m, 0),
});
// Half the groups single-class (all rewards 0): their rows fall back, but they share the batch's padded width.
const halfMixed = rewards.map((x, r) => (ro.promptIndex[r]! % 2 === 0 ? 0 : x));
const variants: { name: string; cond: ConditionedBatch | null }[] = [
  { name: 'plain', cond: null },
  ...[0.2, 0.4].map((share) => ({
    name: `BICC contextShare ${share}`,
    cond: conditionBatch(biccInput(ro, rewards), tok, config, { contextShare: share }),
  })),
  { name: 'BICC 0.4, half the groups single-class', cond: conditionBatch(biccInput(ro, halfMixed), tok, config) },
];

const bench = new Bench({ time: 4000, iterations: 5, warmupIterations: 1 });
for (const v of variants) {
  const cond = v.cond;
  const r = v.name.startsWith('BICC 0.4, half') ? halfMixed : rewards;
  bench.add(v.name, () => step(cond ? (p) => biccLogProbs(p, config, cond) : (p) => scoreLogProbs(p, config, ro), r));
}
bench.add('conditionBatch alone (host bookkeeping)', () => {
  conditionBatch(biccInput(ro, rewards), tok, config);
});
await bench.run();

const ms = (name: string): number => {
  const r = bench.getTask(name)?.result;
  if (!r || !('latency' in r)) throw new Error(`no result for ${name}`);
  return r.latency.mean;
};
const nPos = rewards.filter((x) => x > 0).length;
console.log(`config ${JSON.stringify(config)}`);
console.log(
  `batch: ${problems.length} prompts x G=${G} = ${b} rollouts, P=${ro.promptLen}, C=${c}; ${nPos} positive rows (${verified.filter((v) => v > 0).length} by the verifier); backend cpu, f32; CPU cores: ${(await import('node:os')).cpus().length}`,
);
console.log('');
console.log(
  '| step (GRPO forward + backward) | conditioned rows | inserted tokens/row (mean) | width P + C | tokens padded | tokens real | ms/step | x plain | ms per 1k padded tokens |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
const base = ms('plain');
for (const v of variants) {
  const s = v.cond ? v.cond.batch : ro;
  const tk = tokens(s);
  const rows = v.cond ? v.cond.conditioned.filter(Boolean).length : 0;
  const ins = v.cond ? v.cond.insertedTokens.reduce((a, x) => a + x, 0) / b : 0;
  console.log(
    `| ${v.name} | ${rows}/${b} | ${ins.toFixed(1)} | ${seqLen(s)} | ${tk.padded} | ${tk.real} | ${ms(v.name).toFixed(0)} | ${(ms(v.name) / base).toFixed(2)} | ${((1000 * ms(v.name)) / tk.padded).toFixed(0)} |`,
  );
}
console.log(`\nconditionBatch alone: ${ms('conditionBatch alone (host bookkeeping)').toFixed(2)} ms`);
