#!/usr/bin/env node
/** The command-line entry point (`rlvr`). */
import * as E from 'fp-ts/lib/Either.js';
import { join } from 'node:path';
import { EXPORT_USAGE, parseExportArgs, parseTrainArgs, TRAIN_USAGE, trainErrorInFlags } from './args.js';
import { TrainConfigError } from '../training/config.js';
import { exportConfig, resolveExport, writeOutput } from './export-config.js';
import { runExportData } from './export-data.js';
import { createProgress } from './progress.js';
import { writeRunReport } from './run-report.js';
import { heldOutLine, train } from '../training/trainer.js';
import { describeTraining, rlLabel } from '../training/trains.js';
import { OBJECTIVES } from '../objectives/registry.js';
import { BACKENDS, openBackend } from '../backends/registry.js';
import { describeFailure, EXIT, EXIT_CODE_HELP } from './exit-codes.js';
import { escapeControls } from '../core/errors.js';
import { describeEstimate } from '../training/memory.js';
import { CHILD_ENV, runQuietChild, wantsQuietGpu } from './quiet-gpu.js';
import { unsupportedRuntimeLine } from './runtime-support.js';

const USAGE = `usage: rlvr <command> [options]

commands:
  train          warm-start then RL on a verifiable task (rlvr train --help)
  export-config  the same run as a verl or prime-rl configuration (rlvr export-config --help)
  export-data    the task's training and held-out prompts as verl parquet files (rlvr export-data --help)
  info           the objectives and backends available
  help           this text

exit status:
${EXIT_CODE_HELP}`;

async function runTrain(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(TRAIN_USAGE);
    return EXIT.ok;
  }
  const cfg = parseTrainArgs(argv);
  if (E.isLeft(cfg)) {
    console.error(`rlvr train: ${escapeControls(cfg.left.message)}`);
    return EXIT.usage;
  }
  const stop = stopOnSignals();
  const [t0, cpu0] = [performance.now(), process.cpuUsage()];
  const backend = await openBackend(
    cfg.right.backend,
    cfg.right.threads === null ? {} : { threads: cfg.right.threads },
  );
  const described = backend.describe();
  console.log(`rlvr: backend ${described}`);
  const given = argv.some((a) => a === '--learning-rate' || a.startsWith('--learning-rate='));
  const training = describeTraining(cfg.right, given);
  if (training) console.log(`rlvr: ${training}`);
  const progress = createProgress({ warmStartUntil: cfg.right.warmStartUntil });
  let result: Awaited<ReturnType<typeof train>>;
  try {
    result = await train(cfg.right, {
      backend,
      signal: stop,
      // The CLI never reads `result.records` (they are in metrics.jsonl): keeping them grew a long run's memory
      // by about 0.5 KB a step, up to 2 x DEFAULT_KEEP_RECORDS records.
      keepRecords: 0,
      onProgress: (p) => progress.step(p),
      onMemoryEstimate: (e) => {
        console.log(`rlvr: ${describeEstimate(e)}`);
        // The backend may have taken another memory for this run's estimate (the cpu backend's memory64).
        if (backend.describe() !== described) console.log(`rlvr: backend ${backend.describe()}`);
      },
      onRecord: (r) => {
        if (r.phase === 'eval') progress.eval(r);
      },
    });
  } catch (e) {
    // A setting found wrong once the run began (the model's shape, the prompts' length) names its flag too.
    throw e instanceof TrainConfigError ? trainErrorInFlags(e, argv) : e;
  } finally {
    progress.stop();
    // Releasing the device lets the process exit (Dawn keeps the event loop alive while a device lives).
    backend.dispose();
  }
  const out = cfg.right.outputDir;
  const lora = cfg.right.lora !== null || cfg.right.adapter !== null;
  if (out && lora) {
    console.log(`rlvr: trained LoRA adapter (peft's layout) in ${join(out, 'adapter')}`);
    if (!cfg.right.modelDir)
      console.log(`rlvr: its base, the warm-started model (every weight), in ${join(out, 'base')}`);
  }
  if (out && cfg.right.modelDir && (!lora || cfg.right.mergeLora)) {
    const what = lora ? 'the base with the adapter merged' : 'trained model';
    console.log(`rlvr: ${what} (Hugging Face format) in ${join(out, 'model')}`);
  }
  const { final, warmStart } = result;
  if (out) {
    const cpu = process.cpuUsage(cpu0);
    const written = await writeRunReport(
      out,
      cfg.right,
      { warmStart: warmStart?.passAt1 ?? null, final: final.passAt1 },
      { backend: described, wallSeconds: (performance.now() - t0) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 },
    );
    console.log(`rlvr: reward and held-out pass@1 by RL step, and the run's summary: ${written.join(', ')}`);
  }
  console.log(heldOutLine(final.prompts, warmStart?.passAt1 ?? null, final.passAt1, rlLabel(cfg.right)));
  return EXIT.ok;
}

async function runExportConfig(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(EXPORT_USAGE);
    return EXIT.ok;
  }
  const args = parseExportArgs(argv);
  if (E.isLeft(args)) {
    console.error(`rlvr export-config: ${escapeControls(args.left.message)}`);
    return EXIT.usage;
  }
  const resolved = await resolveExport(args.right);
  if (E.isLeft(resolved)) throw resolved.left;
  const { engine, cfg, target } = resolved.right;
  const out = exportConfig(engine, cfg, target);
  if (E.isLeft(out)) {
    console.error(`rlvr ${escapeControls(out.left.message)}`);
    return EXIT.usage;
  }
  writeOutput(out.right); // a FileSystemError (exit 3) when it cannot be written
  return EXIT.ok;
}

/**
 * SIGINT and SIGTERM ask the run to stop at the next step boundary (the trainer saves and ends with an
 * InterruptedError: one line, exit 5); a second signal stops at once (the last checkpoint is whole: saves are
 * atomic). On a terminal the first signal is acknowledged, since a step can take a while.
 */
function stopOnSignals(): AbortSignal {
  const controller = new AbortController();
  // Run as the filtered child of a WebGPU run (quiet-gpu.ts): if the parent goes, stop as on SIGTERM.
  if (process.env[CHILD_ENV] && process.connected) {
    process.on('disconnect', () => controller.abort('SIGTERM'));
    process.channel?.unref();
  }
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) {
      console.error(`rlvr: ${signal} again: stopping now (the last checkpoint is kept)`);
      process.exit(EXIT.interrupted);
    }
    if (process.stderr.isTTY) console.error(`\nrlvr: ${signal}: stopping after this step (again to stop now)`);
    controller.abort(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return controller.signal;
}

const line = (name: string, help: string): string => `  ${name.padEnd(10)} ${help}`;

async function main(argv: string[]): Promise<number> {
  const [command = 'help', ...rest] = argv;
  switch (command) {
    case 'train':
      return runTrain(rest);
    case 'export-config':
      return runExportConfig(rest);
    case 'export-data':
      return runExportData(rest);
    case 'info':
      console.log(
        `objectives:\n${Object.entries(OBJECTIVES)
          .map(([name, o]) => line(name, o.summary))
          .join('\n')}`,
      );
      console.log(
        `backends:\n${Object.entries(BACKENDS)
          .map(([name, b]) => line(name, b.help))
          .join('\n')}`,
      );
      return EXIT.ok;
    case 'help':
    case '--help':
      console.log(USAGE);
      return EXIT.ok;
    default:
      console.error(`rlvr: unknown command '${escapeControls(command)}'\n${USAGE}`);
      return EXIT.usage;
  }
}

// A reader that went away (`rlvr train | head -1`: EPIPE) must not end the run: what it prints is best effort,
// its results are in files. Writes to a closed stream then fail quietly and training goes on.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

try {
  const argv = process.argv.slice(2);
  const unsupported = wantsQuietGpu(argv) ? undefined : unsupportedRuntimeLine();
  if (unsupported !== undefined) console.error(unsupported);
  process.exitCode = wantsQuietGpu(argv) ? await runQuietChild(argv) : await main(argv);
} catch (e) {
  // One line, whatever failed (see exit-codes.ts); the stack only on request.
  const { code, line } = describeFailure(e);
  console.error(`rlvr: ${line}`);
  if (process.env.RLVR_DEBUG && e instanceof Error) console.error(e.stack);
  process.exitCode = code;
}
