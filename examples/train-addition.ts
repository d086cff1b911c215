/**
 * The main job: a small transformer learns 2-digit addition with a supervised warm-start on worked solutions,
 * then ConSPO on verifiable rewards. Prints held-out pass@1 after the warm-start and after RL.
 *
 *   npm run example:addition [-- --steps 120 --seed 0 --backend cpu|webgpu --output runs/addition]
 */
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import { openBackend, parseTrainConfig, train, type MetricRecord } from '../src/index.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '0' },
    steps: { type: 'string' },
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
  ...(values.output ? { outputDir: values.output } : {}),
});
if (E.isLeft(cfg)) {
  console.error(cfg.left.message);
  process.exit(2);
}

const show = (r: MetricRecord): void => {
  if (r.phase === 'warmstart' && r.step % 50 === 0)
    console.log(`warm-start ${r.step}: loss ${Number(r.loss).toFixed(4)}`);
  if (r.phase === 'rl' && r.step % 10 === 0)
    console.log(
      `rl ${r.step}: reward ${Number(r.reward).toFixed(3)} loss ${Number(r.loss).toFixed(4)} (${Number(r.tokens_per_s).toFixed(0)} tok/s)`,
    );
  if (r.phase === 'eval') console.log(`eval ${r.label}: pass@1 ${Number(r.pass_at_1).toFixed(3)}`);
};
const t0 = performance.now();
const backend = await openBackend(cfg.right.backend, cfg.right.threads === null ? {} : { threads: cfg.right.threads });
const result = await train(cfg.right, { onRecord: show, backend });
backend.dispose();
const before = result.warmStart?.passAt1 ?? NaN;
const after = result.final.passAt1;
console.log(
  `\nheld-out pass@1 (${result.final.prompts} prompts): after warm-start ${before.toFixed(3)}, after RL ${after.toFixed(3)} (${after > before ? 'improved' : 'not improved'}) in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
);
