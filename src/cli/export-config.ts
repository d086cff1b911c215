import type * as E from 'fp-ts/lib/Either.js';
import { FileSystemError } from '../platform/errors.js';
import { writeSync } from '../platform/files.js';
import { stdioWasClosed } from '../platform/host.js';
import type { TrainConfig } from '../training/config.js';
import type { Engine, ExportRefusedError, ExportTarget } from './export-common.js';
import { primeRlConfig } from './export-prime-rl.js';
import { verlConfig } from './export-verl.js';

/**
 * `rlvr export-config --engine verl|prime-rl`: a `TrainConfig` as the configuration of another engine, for the same
 * objective and hyper-parameters, training with the Python package python/rlvr_objectives (the same losses, proved
 * equal on golden batches) from a Hub model directory. Keys are read from the engines' sources at the versions the
 * package pins (VERL_COMMIT: Hydra overrides of verl/trainer/config/ppo_trainer.yaml; PRIME_RL_COMMIT: the TOML of
 * packages/prime-rl-configs). Every `rlvr train` flag is carried, refused naming it (a setting that would change
 * training and has no equivalent), or listed in the header's "not carried" line (export-common.ts NOT_CARRIED).
 * The writers: export-verl.ts and export-prime-rl.ts; reading a run: export-run.ts; escaping: engine-text.ts.
 */

export {
  ENGINES,
  type Engine,
  ExportRefusedError,
  type ExportLora,
  type ExportTarget,
  NOT_CARRIED,
  PRIME_RL_COMMIT,
  primeRlImportPath,
  VERL_COMMIT,
  verlLossName,
} from './export-common.js';
export { PRIME_RL_OBJECTIVES, primeRlConfig } from './export-prime-rl.js';
export { verlConfig, verlTargetModules } from './export-verl.js';
export { type ExportArgs, resolveExport } from './export-run.js';

export function exportConfig(
  engine: Engine,
  cfg: TrainConfig,
  target: ExportTarget,
): E.Either<ExportRefusedError, string> {
  return engine === 'verl' ? verlConfig(cfg, target) : primeRlConfig(cfg, target);
}

/** What a write to a full pipe waits on between tries. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * Write the configuration to standard output (`fd`), all of it or a `FileSystemError` (exit 3): a full disk or a
 * closed stdout must not exit 0 with the configuration lost, so that `export-config ... > train.sh && bash
 * train.sh` stops there. Written synchronously: the CLI's stdout stream swallows write errors (a reader that went
 * away must not end a training run), and this output is the command's whole result.
 */
export function writeOutput(text: string, fd = 1): void {
  // Closed at start (`>&-`), Node put /dev/null in its place: every write would succeed and be lost.
  if (stdioWasClosed(fd))
    throw FileSystemError.from('standard output', Object.assign(new Error('closed'), { code: 'EBADF' }));
  const bytes = Buffer.from(text, 'utf8');
  let at = 0;
  while (at < bytes.length) {
    try {
      at += writeSync(fd, bytes, at, bytes.length - at);
    } catch (e) {
      // A pipe left non-blocking by another process: wait for room, as a blocking write would.
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN') {
        Atomics.wait(PAUSE, 0, 0, 5);
        continue;
      }
      throw FileSystemError.from('standard output', e);
    }
  }
}
