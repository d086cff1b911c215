/**
 * The main job: a small transformer learns 2-digit addition with a supervised warm-start on worked solutions,
 * then ConSPO on verifiable rewards. Prints held-out pass@1 after the warm-start and after RL.
 *
 *   npm run example:addition [-- --steps 120 --warm-start-steps 450 --eval-prompts 200 --seed 0 --backend cpu|webgpu
 *                               --output runs/addition]
 */
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import { heldOutLine, openBackend, parseTrainConfig, train, type MetricRecord } from '../src/index.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '0' },
    steps: { type: 'string' },
    'warm-start-steps': { type: 'string' },
    'eval-prompts': { type: 'string' },
    objective: { type: 'string', default: 'conspo' },
    output: { type: 'string' },
    backend: { type: 'string', default: 'cpu' },
  },
});
const cfg = parseTrainConfig({
  seed: Number(values.seed),
  objective: values.objective as 'conspo',
  backend: values.backend as 'cpu',
  ...(values.steps ? { steps: Number(values.steps) } : {}),
  ...(values['warm-start-steps'] ? { warmStartSteps: Number(values['warm-start-steps']) } : {}),
  ...(values['eval-prompts'] ? { evalPrompts: Number(values['eval-prompts']) } : {}),
  ...(values.output ? { outputDir: values.output } : {}),
});
if (E.isLeft(cfg)) {
  console.error(cfg.left.message);
  process.exit(2);
}
const c = cfg.right;

// What the run will do, at once: the warm-start alone takes a minute or two on 2 cores.
console.log(
  `warm-start: ${c.warmStartSteps} steps of ${c.warmStartBatchSize} worked solutions, then ${c.steps} RL ` +
    `step${c.steps === 1 ? '' : 's'} of ${c.objective} (${c.promptsPerStep} prompts x ${c.numGenerations} completions) ` +
    `on ${c.backend}; held-out pass@1 on ${c.evalPrompts} prompts before and after RL`,
);
// Step 1 and every 10th (and the last) of each phase: the run speaks from its first step.
const shown = (step: number, total: number): boolean => step === 1 || step % 10 === 0 || step === total;
const show = (r: MetricRecord): void => {
  if (r.phase === 'warmstart' && shown(r.step, c.warmStartSteps))
    console.log(`warm-start ${r.step}/${c.warmStartSteps}: loss ${Number(r.loss).toFixed(4)}`);
  if (r.phase === 'rl' && shown(r.step, c.steps))
    console.log(
      `rl ${r.step}/${c.steps}: reward ${Number(r.reward).toFixed(3)} loss ${Number(r.loss).toFixed(4)} (${Number(r.tokens_per_s).toFixed(0)} tok/s)`,
    );
  if (r.phase === 'eval') console.log(`eval ${r.label}: pass@1 ${Number(r.pass_at_1).toFixed(3)}`);
};
const t0 = performance.now();
const backend = await openBackend(c.backend, c.threads === null ? {} : { threads: c.threads });
const result = await train(c, { onRecord: show, backend });
backend.dispose();
console.log(
  `\n${heldOutLine(result.final.prompts, result.warmStart?.passAt1 ?? null, result.final.passAt1)}, ` +
    `in ${((performance.now() - t0) / 1000).toFixed(0)} s of wall time`,
);
