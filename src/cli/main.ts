#!/usr/bin/env node
/** The command-line entry point (`rlvr`). */
import * as E from 'fp-ts/lib/Either.js';
import { join } from 'node:path';
import { parseTrainArgs, TRAIN_USAGE } from './args.js';
import { createProgress } from './progress.js';
import { train } from '../training/trainer.js';
import { OBJECTIVE_NAMES } from '../objectives/registry.js';
import { RlvrError } from '../core/errors.js';
import { openBackend } from '../backends/open.js';
import { WebGpuBackend } from '../backends/webgpu/index.js';
import { describeEstimate } from '../nn/memory.js';
import { defaultMemoryLimits } from '../training/pretrained.js';

const USAGE = `usage: rlvr <command> [options]

commands:
  train       warm-start then RL on a verifiable task (rlvr train --help)
  info        the objectives and backends available
  help        this text`;

async function runTrain(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(TRAIN_USAGE);
    return 0;
  }
  const cfg = parseTrainArgs(argv);
  if (E.isLeft(cfg)) {
    console.error(`rlvr train: ${cfg.left.message}`);
    return 2;
  }
  const backend = await openBackend(cfg.right.backend);
  if (backend instanceof WebGpuBackend) console.log(`rlvr: WebGPU adapter: ${backend.adapter.summary}`);
  // A GPU buffer is bounded by the device's binding limit; the total by the host's memory (or --memory-limit-gb).
  const maxBufferBytes =
    backend instanceof WebGpuBackend ? backend.runtime.device.limits.maxStorageBufferBindingSize : undefined;
  const progress = createProgress();
  let result;
  try {
    result = await train(cfg.right, {
      backend,
      onProgress: (p) => progress.step(p),
      onMemoryEstimate: (e) => console.log(`rlvr: ${describeEstimate(e)}`),
      memoryLimits: { ...defaultMemoryLimits(cfg.right), ...(maxBufferBytes === undefined ? {} : { maxBufferBytes }) },
      onRecord: (r) => {
        if (r.phase === 'eval') progress.eval(r);
      },
    });
  } finally {
    progress.stop();
    // Releasing the device lets the process exit (Dawn keeps the event loop alive while a device lives).
    if (backend.name !== 'cpu') backend.dispose();
  }
  if (cfg.right.modelDir && cfg.right.outputDir) {
    console.log(`rlvr: trained model (Hugging Face format) in ${join(cfg.right.outputDir, 'model')}`);
  }
  const before = result.warmStart?.passAt1;
  const after = result.final.passAt1;
  console.log(
    before === undefined
      ? `held-out pass@1 after RL: ${after.toFixed(3)}`
      : `held-out pass@1: after warm-start ${before.toFixed(3)}, after RL ${after.toFixed(3)} (${after > before ? '+' : ''}${(after - before).toFixed(3)})`,
  );
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const [command = 'help', ...rest] = argv;
  switch (command) {
    case 'train':
      return runTrain(rest);
    case 'info':
      console.log(`objectives: ${OBJECTIVE_NAMES.join(', ')}\nbackends: cpu, webgpu (needs an adapter)`);
      return 0;
    case 'help':
    case '--help':
      console.log(USAGE);
      return 0;
    default:
      console.error(`rlvr: unknown command '${command}'\n${USAGE}`);
      return 2;
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  // Typed errors are the user's to fix: one clear line. Anything else is a bug: the stack.
  if (e instanceof RlvrError) {
    console.error(`rlvr: ${e.message}`);
    process.exitCode = 1;
  } else throw e;
}
