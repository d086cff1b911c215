/**
 * Run as a separate process by checkpoint.spec.ts: train STEPS steps, save a checkpoint to DIR, report "saved",
 * then wait to be killed (SIGKILL), as a preempted training job would be.
 */
import { saveCheckpoint } from '../../../src/io/checkpoint.js';
import { config, initRun, trainStep } from './resume-run.js';

const dir = process.env.RESUME_DIR!;
const steps = Number(process.env.RESUME_STEPS);
let state = initRun(Number(process.env.RESUME_SEED));
for (let i = 0; i < steps; i++) state = (await trainStep(state)).next;
const saved = await saveCheckpoint(dir, {
  config,
  params: state.params,
  optimizer: state.opt,
  rngs: { train: state.rng.state() },
  trainerState: { step: steps },
})();
if (saved._tag === 'Left') throw saved.left;
process.stdout.write('saved\n');
setInterval(() => {}, 1000);
