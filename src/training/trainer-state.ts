import * as E from 'fp-ts/lib/Either.js';
import {
  anyRecord,
  bool,
  type Check,
  exactRecord,
  fail,
  nullable,
  num,
  oneOf,
  positiveInt,
  type Spec,
  str,
} from '../core/validate.js';
import { CHECKPOINT_FILES, type Json, loadState, readGeneration } from '../io/checkpoint.js';
import { CheckpointError } from '../io/safetensors.js';
import { OBJECTIVE_NAMES } from '../objectives/registry.js';
import { join, openRegular, resolve, stat } from '../platform/files.js';
import { digitsCheck, TASK_NAMES, type TrainConfig } from './config.js';
import type { EvalResult } from './evaluate.js';
import type { DatasetIdentity, RunIdentity } from './resume-check.js';

/**
 * The trainer's part of a checkpoint (`trainer_state.json`'s `trainerState`), validated before a resumed run
 * trusts any of it: every field against its type and range (an exact record: nothing missing, nothing unknown),
 * then against the files it refers to: the optimizer's step count and the run's `metrics.jsonl`, whose length
 * at the save it records. A state that fails is a damaged checkpoint (`CheckpointError`, kind 'bad-state', the
 * field named `trainerState.<field>`; exit 3).
 */
export interface TrainerState {
  readonly phase: 'warmstart' | 'rl';
  /** Steps taken in the phase. */
  readonly step: number;
  readonly warmStartEval: EvalResult | null;
  readonly finalEval: EvalResult | null;
  readonly identity: RunIdentity;
  /** The length of metrics.jsonl when the checkpoint was saved. */
  readonly metricsBytes: number;
  /**
   * Every setting of the run as of this checkpoint (`recordSettings`: its TrainConfig, the paths it reads made
   * absolute), which `rlvr export-config --run` carries to another engine; null in a checkpoint written before
   * runs recorded them. Checked as a config when read (`parseTrainConfig`), not here.
   */
  readonly settings: Json | null;
}

/**
 * The settings a checkpoint records: the config as JSON, with the paths the run reads (--model, --adapter,
 * --dataset) absolute, so that they name the same files from wherever the record is read.
 */
export function recordSettings(cfg: TrainConfig): Json {
  const absolute = (p: string | null): string | null => (p === null ? null : resolve(p));
  const settings = {
    ...cfg,
    modelDir: absolute(cfg.modelDir),
    adapter: absolute(cfg.adapter),
    dataset: absolute(cfg.dataset),
  };
  return JSON.parse(JSON.stringify(settings)) as Json;
}

/** The largest step count a run can reach (`bounds.ts` limits steps and warm-start steps to 1e9). */
export const MAX_STEP = 1e9;

const unit = num((x) => x >= 0 && x <= 1, 'must be in [0, 1]');
const evalResult: Check<EvalResult> = exactRecord<EvalResult>({
  passAt1: unit,
  avgAtK: unit,
  passAtK: unit,
  k: positiveInt,
  prompts: positiveInt,
});

const datasetIdentity: Check<DatasetIdentity> = exactRecord<DatasetIdentity>({
  path: str,
  sha256: (v) => (typeof v === 'string' && /^[0-9a-f]{64}$/.test(v) ? E.right(v) : fail('must be 64 hex digits')),
});

const identityFields = exactRecord<RunIdentity>({
  task: oneOf(TASK_NAMES),
  digits: nullable(digitsCheck),
  dataset: nullable(datasetIdentity),
  objective: oneOf(OBJECTIVE_NAMES),
  objectiveConfig: anyRecord as Check<unknown> as Check<Json>,
  advantage: oneOf(['group', 'rcc']),
  rccDelta: oneOf(['sum', 'mean']),
  bicc: bool,
});

/** A checkpoint written before datasets were recorded has no `dataset`: it reads as "no dataset" (null). */
const identity: Check<RunIdentity> = (v) =>
  identityFields(
    typeof v === 'object' && v !== null && !Array.isArray(v) && !Object.hasOwn(v, 'dataset')
      ? { ...v, dataset: null }
      : v,
  );

const SPEC: Spec<TrainerState> = {
  phase: oneOf(['warmstart', 'rl']),
  step: num((x) => Number.isInteger(x) && x >= 0 && x <= MAX_STEP, `must be an integer in 0..${MAX_STEP}`),
  warmStartEval: nullable(evalResult),
  finalEval: nullable(evalResult),
  identity,
  metricsBytes: num((x) => Number.isSafeInteger(x) && x >= 0, 'must be a nonnegative integer (a length in bytes)'),
  settings: nullable(anyRecord as Check<unknown> as Check<Json>),
};

/** A checkpoint written before settings were recorded has no `settings`: it reads as "not recorded" (null). */
const withSettings = (json: unknown): unknown =>
  typeof json === 'object' && json !== null && !Array.isArray(json) && !Object.hasOwn(json, 'settings')
    ? { ...json, settings: null }
    : json;

const bad = (field: string, detail: string): CheckpointError =>
  new CheckpointError('bad-state', `trainerState.${field}`, detail, CHECKPOINT_FILES.state);

/** Type and range of every field, and the rules between them. */
export function parseTrainerState(raw: unknown): E.Either<CheckpointError, TrainerState> {
  const json = withSettings(raw);
  const r = exactRecord(SPEC)(json);
  if (E.isLeft(r)) {
    const field = r.left.path.join('.');
    return E.left(
      field === ''
        ? new CheckpointError('bad-state', 'trainerState', r.left.reason, CHECKPOINT_FILES.state)
        : bad(field, `${JSON.stringify(valueAt(json, r.left.path)) ?? 'undefined'} ${r.left.reason}`),
    );
  }
  const s = r.right;
  if (s.phase === 'rl' && s.warmStartEval === null)
    return E.left(bad('warmStartEval', 'is null, but the run is past its warm-start (phase rl)'));
  if (s.phase === 'warmstart' && s.finalEval !== null)
    return E.left(bad('finalEval', 'is set, but the run is still in its warm-start'));
  return E.right(s);
}

const valueAt = (root: unknown, path: readonly string[]): unknown =>
  path.reduce<unknown>(
    (o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined),
    root,
  );

/**
 * The state against the optimizer it was saved with: a warm-start step takes at most one AdamW update, and RL
 * starts with a fresh optimizer, so at RL step 0 it has taken none.
 */
export function checkOptimizerStep(s: TrainerState, optimizerStep: number): CheckpointError | null {
  if (s.phase === 'warmstart' && optimizerStep > s.step)
    return bad('step', `is warm-start step ${s.step}, but the optimizer has taken ${optimizerStep} updates`);
  if (s.phase === 'rl' && s.step === 0 && optimizerStep > 0)
    return bad('step', `is RL step 0, but the optimizer has taken ${optimizerStep} updates since RL began`);
  return null;
}

interface TrainingLine {
  readonly phase: 'warmstart' | 'rl';
  readonly step: number;
}

/**
 * The state against the run's metrics.jsonl (`path`; `required` when the run resumes into it): the recorded
 * length ends a line within the file, and the last training record before it is the step the checkpoint is at.
 * A file that is not there is not checked unless required.
 */
export async function checkMetrics(s: TrainerState, path: string, required: boolean): Promise<CheckpointError | null> {
  const size = await stat(path).then(
    (st) => (st.isFile() ? st.size : null),
    () => null,
  );
  if (size === null) {
    return required && s.metricsBytes > 0
      ? bad('metricsBytes', `is ${s.metricsBytes}, but ${path} is missing or not a regular file`)
      : null;
  }
  if (s.metricsBytes > size)
    return bad('metricsBytes', `is ${s.metricsBytes}, past the end of ${path} (${size} bytes)`);
  const last = await lastTrainingLine(path, s.metricsBytes);
  if (typeof last === 'string') return bad('metricsBytes', `is ${s.metricsBytes}: ${last} in ${path}`);
  const where = `the last ${last?.phase} record of ${path} before byte ${s.metricsBytes}`;
  if (s.phase === 'warmstart' && last !== null && (last.phase !== 'warmstart' || last.step !== s.step))
    return bad('step', `is warm-start step ${s.step}, but ${where} is step ${last.step}`);
  if (s.phase === 'rl' && last?.phase === 'rl' && last.step !== s.step)
    return bad('step', `is RL step ${s.step}, but ${where} is step ${last.step}`);
  if (s.phase === 'rl' && last?.phase === 'warmstart' && s.step !== 0)
    return bad('step', `is RL step ${s.step}, but ${path} has no RL record before byte ${s.metricsBytes}`);
  return null;
}

const CHUNK = 1 << 16;

/**
 * The last warm-start or RL record in the first `end` bytes of a metrics file, read backwards a chunk at a time
 * (memory stays bounded by the longest line); null when there is none, or a string saying what is wrong.
 */
async function lastTrainingLine(path: string, end: number): Promise<TrainingLine | null | string> {
  if (end === 0) return null;
  const h = await openRegular(path);
  try {
    const at = async (pos: number, length: number): Promise<Buffer> => {
      const buf = Buffer.alloc(length);
      const { bytesRead } = await h.read(buf, 0, length, pos);
      return buf.subarray(0, bytesRead);
    };
    if ((await at(end - 1, 1))[0] !== 0x0a) return 'it does not end a line';
    let pos = end - 1; // the newline that ends the last line
    let tail: Buffer = Buffer.alloc(0); // bytes after the last newline found, up to pos
    while (pos > 0 || tail.length > 0) {
      const nl = tail.lastIndexOf(0x0a);
      if (nl < 0 && pos > 0) {
        const from = Math.max(0, pos - CHUNK);
        tail = Buffer.concat([await at(from, pos - from), tail]);
        pos = from;
        continue;
      }
      const line = (nl < 0 ? tail : tail.subarray(nl + 1)).toString('utf8');
      tail = nl < 0 ? Buffer.alloc(0) : tail.subarray(0, nl);
      if (line.trim() === '') continue;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        return `a line before byte ${end} is not JSON`;
      }
      const { phase, step } = (record ?? {}) as { phase?: unknown; step?: unknown };
      if ((phase === 'warmstart' || phase === 'rl') && typeof step === 'number') return { phase, step };
    }
    return null;
  } finally {
    await h.close();
  }
}

/**
 * The trainer state of the checkpoint at `dir` (a run's OUTPUT/checkpoint, full or LoRA), validated: what a run
 * records of itself (`identity`: task, objective and its parsed options, advantage, BICC), read without loading
 * any tensor (`rlvr export-config --run`). A checkpoint without one (a weights-only export) is a `CheckpointError`.
 */
export async function readTrainerState(dir: string): Promise<E.Either<CheckpointError, TrainerState>> {
  const saved = await readGeneration(
    dir,
    (resolved) => loadState(join(resolved, CHECKPOINT_FILES.state)),
    () => undefined,
  )();
  if (E.isLeft(saved)) return saved;
  if (saved.right.trainerState === null)
    return E.left(new CheckpointError('bad-state', 'trainerState', 'is missing (no run recorded it)', dir));
  return parseTrainerState(saved.right.trainerState);
}
