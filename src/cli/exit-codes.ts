import { escapeControls, RlvrError } from '../core/errors.js';
import { FileSystemError } from '../platform/errors.js';
import { CheckpointError } from '../io/safetensors.js';
import { DivergedError } from '../training/divergence.js';
import { InterruptedError } from '../training/interrupted.js';
import { TokenizerLoadError } from '../tokenizers/hf-tokenizer.js';

/**
 * One exit-status convention for `rlvr`, printed by `--help`. Every failure is one line on stderr naming what
 * was wrong (the path and cause for a file); no stack trace reaches the user unless RLVR_DEBUG is set.
 */
export const EXIT = {
  ok: 0,
  /** A bug: an error the library did not expect (reported in one line; RLVR_DEBUG=1 prints the stack). */
  internal: 1,
  /** The command must change: bad flags or values, sizes over the limits, a refused --output, a resume mismatch. */
  usage: 2,
  /** A file could not be read or written, or a checkpoint or model directory is damaged or unusable. */
  io: 3,
  /** Training diverged: a non-finite loss, gradient norm or updated weights (the last good checkpoint is kept). */
  diverged: 4,
  /** Stopped by SIGINT or SIGTERM at a step boundary, with the checkpoint written (a second signal: at once). */
  interrupted: 5,
} as const;

export const EXIT_CODE_HELP = [
  `  ${EXIT.ok}  success`,
  `  ${EXIT.internal}  internal error (a bug; RLVR_DEBUG=1 prints the stack)`,
  `  ${EXIT.usage}  usage: bad arguments or settings, sizes over the limits, --output refused, resume mismatch`,
  `  ${EXIT.io}  a file could not be read or written, or a checkpoint or model directory is damaged or unusable`,
  `  ${EXIT.diverged}  training diverged (non-finite loss, gradient norm or updated weights)`,
  `  ${EXIT.interrupted}  interrupted by SIGINT or SIGTERM: stopped after a step with the checkpoint written`,
].join('\n');

const isSystemError = (e: unknown): e is NodeJS.ErrnoException =>
  e instanceof Error &&
  typeof (e as NodeJS.ErrnoException).code === 'string' &&
  (e as NodeJS.ErrnoException).syscall !== undefined;

/**
 * The exit status and the one line to print for an error that ended a command, its control characters escaped
 * (a path or name from a file can hold ESC sequences or a newline; see `escapeControls`).
 */
export function describeFailure(e: unknown): { code: number; line: string } {
  const { code, line } = failure(e);
  return { code, line: escapeControls(line) };
}

function failure(e: unknown): { code: number; line: string } {
  if (e instanceof DivergedError) return { code: EXIT.diverged, line: e.message };
  if (e instanceof InterruptedError) return { code: EXIT.interrupted, line: e.message };
  // A file that cannot be read or written, a damaged checkpoint, or a model directory the run cannot use (its
  // config, weights, tokenizer or chat template): the directory must change, not the command.
  if (e instanceof FileSystemError || e instanceof CheckpointError || e instanceof TokenizerLoadError)
    return { code: EXIT.io, line: e.message };
  if (isSystemError(e))
    return { code: EXIT.io, line: FileSystemError.from(e.path ?? `(a file, in ${e.syscall})`, e).message };
  if (e instanceof RlvrError) return { code: EXIT.usage, line: e.message };
  const message = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return { code: EXIT.internal, line: `internal error: ${message.split('\n')[0]} (RLVR_DEBUG=1 prints the stack)` };
}
