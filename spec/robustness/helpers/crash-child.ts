/** Run by crash.spec.ts in its own process: the crash run, killed by RLVR_TEST_CRASH_AT at a named point. */
import { train } from '../../../src/training/trainer.js';
import { crashConfig, task } from './crash-run.js';

await train(crashConfig(process.env.CRASH_DIR!, null), { task });
process.stdout.write('finished\n');
