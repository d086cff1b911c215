import { RlvrError } from '../core/errors.js';
import { FileSystemError } from '../platform/errors.js';
import { sha256File } from '../platform/host.js';
import type { Json } from '../io/checkpoint.js';
import type { TransformerConfig } from '../nn/transformer.js';
import type { Digits, TrainConfig } from './config.js';

/**
 * What a resumed run must share with the run that wrote the checkpoint. The rule (one, documented in
 * ARCHITECTURE.md): the command states the run, the checkpoint must agree with it, and a difference is a
 * `ResumeMismatchError` naming the field and both values; nothing is silently taken from either side.
 * - always: the model config (every field of config.json) and the task (name and digits; for a `--dataset` run,
 *   the dataset's content, by SHA-256: the same rows under another path resume, other rows are refused);
 * - once RL has taken a step: the objective with its parsed options, the advantage, the RCC delta and BICC. A
 *   checkpoint from the warm-start (or at RL step 0) carries nothing objective-specific, which is how one
 *   warm-start serves several methods.
 * Steps, learning rates and the other schedule settings may change on resume (extending a run is legitimate).
 */
export class ResumeMismatchError extends RlvrError {
  constructor(
    readonly field: string,
    readonly checkpointValue: unknown,
    readonly commandValue: unknown,
  ) {
    super(`resume: ${field} differs: the checkpoint has ${show(checkpointValue)}, the command ${show(commandValue)}`);
  }
}

const show = (v: unknown): string => JSON.stringify(v) ?? String(v);

/** A `--dataset` file as a run records it: the path as given, and the SHA-256 of its content. */
export interface DatasetIdentity {
  readonly path: string;
  readonly sha256: string;
}

/** The run settings a checkpoint records in its trainer state. */
export interface RunIdentity {
  readonly task: string;
  readonly digits: Digits | null;
  /** The dataset the run trains on; null for a built-in task (or a checkpoint written before this was recorded). */
  readonly dataset: DatasetIdentity | null;
  readonly objective: string;
  readonly objectiveConfig: Json;
  readonly advantage: string;
  readonly rccDelta: string;
  readonly bicc: boolean;
}

export function runIdentity(
  cfg: TrainConfig,
  objectiveConfig: unknown,
  dataset: DatasetIdentity | null = null,
): RunIdentity {
  return {
    task: cfg.task,
    digits: cfg.digits,
    dataset,
    objective: cfg.objective,
    objectiveConfig: JSON.parse(JSON.stringify(objectiveConfig)) as Json,
    advantage: cfg.advantage,
    rccDelta: cfg.rccDelta,
    bicc: cfg.bicc,
  };
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
/** Datasets are the same by content: a file moved or renamed is the same dataset. */
const sameDataset = (a: DatasetIdentity | null, b: DatasetIdentity | null): boolean =>
  (a?.sha256 ?? null) === (b?.sha256 ?? null);

/**
 * Compare a checkpoint with the command; `saved` is null for a checkpoint written before identities were
 * recorded (then only the model config is compared).
 */
export function checkResume(
  checkpoint: { config: TransformerConfig; identity: RunIdentity | null; rlStepsTaken: number },
  command: { config: TransformerConfig; identity: RunIdentity },
): ResumeMismatchError | null {
  for (const key of Object.keys(command.config) as (keyof TransformerConfig)[]) {
    if (checkpoint.config[key] !== command.config[key])
      return new ResumeMismatchError(`model.${key}`, checkpoint.config[key], command.config[key]);
  }
  const saved = checkpoint.identity;
  if (!saved) return null;
  if (!sameDataset(saved.dataset, command.identity.dataset))
    return new ResumeMismatchError('dataset', saved.dataset, command.identity.dataset);
  const always: (keyof RunIdentity)[] = ['task', 'digits'];
  const afterRl: (keyof RunIdentity)[] = ['objective', 'objectiveConfig', 'advantage', 'rccDelta', 'bicc'];
  for (const key of checkpoint.rlStepsTaken > 0 ? [...always, ...afterRl] : always) {
    if (!same(saved[key], command.identity[key]))
      return new ResumeMismatchError(key, saved[key], command.identity[key]);
  }
  return null;
}

/** A dataset file's path as given and the SHA-256 of its content (read a chunk at a time). */
export async function datasetIdentity(path: string): Promise<DatasetIdentity> {
  try {
    return { path, sha256: (await sha256File(path)).sha256 };
  } catch (e) {
    throw FileSystemError.from(path, e);
  }
}
