import { computeDType } from '../core/dtype.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import { access, join, readRegularFile, stat, writeFile } from '../platform/files.js';
import * as E from 'fp-ts/lib/Either.js';
import * as TE from 'fp-ts/lib/TaskEither.js';
import { pipe } from 'fp-ts/lib/function.js';
import type { RngState } from '../core/rng.js';
import { getDefaultBackend } from '../core/runtime.js';
import { dispose } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { crashPoint } from '../platform/host.js';
import { FileSystemError } from '../platform/errors.js';
import { resolveDir, verifyManifest, writeDirAtomic } from './atomic-dir.js';
import { buildParams, checkHfNames, fromHfConfig, toHfConfig, toHfNames, type LoadOptions } from './hf.js';
import type { OptimizerState } from '../nn/optim.js';
import { CheckpointError, type HostTensor } from './safetensors.js';
import {
  readSafetensorsIndex,
  streamTensors,
  tensorsToWrite,
  writeSafetensorsFile,
  type SafetensorsIndex,
} from './safetensors-file.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';

/**
 * A training checkpoint is a directory: `config.json` (Hugging Face LlamaConfig fields), `model.safetensors`
 * (Hugging Face Llama names, so other tools can read the weights), `optimizer.safetensors` (AdamW moments under
 * `exp_avg.<name>` and `exp_avg_sq.<name>`, the step count in the metadata), `trainer_state.json` (named RNG
 * states and whatever JSON the trainer keeps) and `manifest.json` (each file's size and SHA-256, written last).
 * The directory is written whole or not at all (`writeDirAtomic`: a sibling generation, fsync, an atomic swap
 * of the `dir` link), so a run killed during a save leaves the previous checkpoint loadable; loading verifies
 * the manifest and refuses non-finite weights unless `allowNonFinite`. Restoring all of it resumes a run exactly.
 * Both safetensors files are written and read a tensor at a time (`safetensors-file.ts`), so host memory stays
 * near the largest tensor and a file may be of any size (one buffer, or one fs call, stops at 2 GiB).
 */
export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

export interface Checkpoint {
  readonly config: TransformerConfig;
  readonly params: TransformerParams;
  readonly optimizer?: OptimizerState<TransformerParams>;
  /** Named generator states (sampling, prompt order, ...). */
  readonly rngs?: Readonly<Record<string, RngState>>;
  /** Trainer-owned state (step, counters, config), saved as JSON. */
  readonly trainerState?: Json;
}

export const CHECKPOINT_FILES = {
  config: 'config.json',
  model: 'model.safetensors',
  optimizer: 'optimizer.safetensors',
  state: 'trainer_state.json',
} as const;

export const FORMAT = 'rlvr-wgpu/1';

export async function hostTensors(named: Map<string, Tensor>, prefix = ''): Promise<Map<string, HostTensor>> {
  const out = new Map<string, HostTensor>();
  // A frozen bf16/f16 weight reads back widened to f32 and is saved so.
  for (const [name, t] of named)
    out.set(prefix + name, { dtype: computeDType(t.dtype), shape: t.shape, data: await t.data() });
  return out;
}

const io =
  (field: string) =>
  (e: unknown): CheckpointError => {
    if (e instanceof CheckpointError) return e;
    const detail = e instanceof FileSystemError ? e.message : FileSystemError.from(field, e).message;
    return new CheckpointError('io', field, detail.startsWith(`${field}: `) ? detail.slice(field.length + 2) : detail);
  };

async function writeFileAt(dir: string, name: string, data: string): Promise<void> {
  await writeFile(join(dir, name), data);
  crashPoint('checkpoint:file');
}

export function saveCheckpoint(dir: string, ckpt: Checkpoint): TE.TaskEither<CheckpointError, void> {
  return TE.tryCatch(async () => {
    const named = toHfNames(ckpt.params);
    const opt = ckpt.optimizer;
    await writeDirAtomic(dir, async (tmp) => {
      // Each tensor is read back from its backend as it is written: host memory holds one tensor, not the file.
      // A failure part way leaves nothing behind (writeDirAtomic removes the generation).
      const dtypes = [...new Set([...named.values()].map((t) => t.dtype))].join(',');
      await writeSafetensorsFile(join(tmp, CHECKPOINT_FILES.model), tensorsToWrite(named, { asStored: true }), 'F32', {
        format: 'pt',
        producer: FORMAT,
        dtypes,
      });
      crashPoint('checkpoint:file');
      if (opt) {
        const moments = [
          ...tensorsToWrite(toHfNames(opt.m), { prefix: 'exp_avg.', asStored: true }),
          ...tensorsToWrite(toHfNames(opt.v), { prefix: 'exp_avg_sq.', asStored: true }),
        ];
        await writeSafetensorsFile(join(tmp, CHECKPOINT_FILES.optimizer), moments, 'F32', {
          step: String(opt.step),
          producer: FORMAT,
        });
        crashPoint('checkpoint:file');
      }
      const torchDtype = ckpt.params.embed.weight.dtype === 'f64' ? 'float64' : 'float32';
      const hfConfig = { ...toHfConfig(ckpt.config), torch_dtype: torchDtype };
      await writeFileAt(tmp, CHECKPOINT_FILES.config, JSON.stringify(hfConfig, null, 2));
      const state = { format: FORMAT, rngs: ckpt.rngs ?? {}, trainerState: ckpt.trainerState ?? null };
      await writeFileAt(tmp, CHECKPOINT_FILES.state, JSON.stringify(state, null, 2));
    });
  }, io(dir));
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

const readJson = (path: string): TE.TaskEither<CheckpointError, unknown> =>
  pipe(
    TE.tryCatch(() => readRegularFile(path, 'utf8'), io(path)),
    TE.chainEitherK((text) =>
      E.tryCatch(
        () => JSON.parse(text) as unknown,
        (e) => new CheckpointError('bad-state', path, `not valid JSON (${jsonSyntaxDetail(e)})`),
      ),
    ),
  );

/** A checkpoint directory's `config.json`: the model it was saved with. */
export const readCheckpointConfig = (dir: string): TE.TaskEither<CheckpointError, TransformerConfig> =>
  pipe(readJson(join(dir, CHECKPOINT_FILES.config)), TE.chainEitherK(fromHfConfig));

export interface CheckpointLoadOptions extends LoadOptions {
  /** Accept NaN or infinite values in the weights and moments (refused by default: a diverged run's state). */
  readonly allowNonFinite?: boolean;
}

/** A tensor's first non-finite value, as a typed error (unless allowed). */
function nonFinite(name: string, t: HostTensor, opts: CheckpointLoadOptions): CheckpointError | null {
  if (opts.allowNonFinite || t.dtype === 'i32') return null;
  const i = t.data.findIndex((v) => !Number.isFinite(v));
  if (i < 0) return null;
  const detail = `holds ${t.data[i]} at flat index ${i} (load with allowNonFinite to accept)`;
  return new CheckpointError('non-finite', name, detail);
}

/** A checkpoint's safetensors file, its header validated against the file (nothing else read yet). */
const indexOf =
  (path: string): TE.TaskEither<CheckpointError, SafetensorsIndex> =>
  () =>
    readSafetensorsIndex(path);

/**
 * The parameter pytrees of a file, one per name prefix, whose names and shapes were checked against the config.
 * Tensors are read in file order, each checked (finite unless allowed, then `check`) and uploaded before the
 * next is read; on any failure what was uploaded is disposed.
 */
function uploadTrees(
  index: SafetensorsIndex,
  config: TransformerConfig,
  opts: CheckpointLoadOptions,
  prefixes: readonly string[],
  check: (name: string, t: HostTensor) => CheckpointError | null = () => null,
): TE.TaskEither<CheckpointError, TransformerParams[]> {
  return async () => {
    const backend = opts.backend ?? getDefaultBackend();
    const loaded = new Map<string, Tensor>();
    try {
      await streamTensors(index, [...index.entries.keys()], (name, t) => {
        const bad = nonFinite(name, t, opts) ?? check(name, t);
        if (bad) throw bad;
        loaded.set(name, tensor(t.data, t.shape, { dtype: opts.dtype ?? t.dtype, backend }));
      });
    } catch (e) {
      dispose([...loaded.values()]);
      return E.left(io(index.path)(e));
    }
    return E.right(prefixes.map((p) => buildParams(config, (name) => loaded.get(p + name)!) as TransformerParams));
  };
}

/**
 * The directory a checkpoint path names (following the atomic writer's link; `resolved`, where the caller resolved
 * it already), verified against its manifest. Problems are named under `dir`, the path the user gave.
 */
export function openDir(dir: string, resolved?: string): TE.TaskEither<CheckpointError, string> {
  return pipe(
    TE.tryCatch(async () => {
      const at = resolved ?? (await resolveDir(dir));
      // A path with nothing there (a run killed before its first save) is an io error, not a damaged checkpoint.
      if (!(await stat(at)).isDirectory())
        throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR', path: at });
      return at;
    }, io(dir)),
    TE.chain((at) =>
      pipe(
        TE.tryCatch(() => verifyManifest(at), io(at)),
        TE.chainEitherK((problem) =>
          problem ? E.left(new CheckpointError('corrupt', join(dir, problem.file), problem.detail)) : E.right(at),
        ),
      ),
    ),
  );
}

/** How many times a read of a checkpoint starts over because another run replaced it meanwhile. */
export const READ_TRIES = 10;

/** For specs only: called after each try resolved the checkpoint's generation, before anything is read from it. */
export const readHooks: { afterResolve: ((resolved: string, attempt: number) => Promise<void>) | null } = {
  afterResolve: null,
};

/**
 * Read one whole generation of the checkpoint at `path`: resolve its link once, `read` every file from that
 * generation, then resolve again. A writer removes a generation only after pointing the link elsewhere, so an
 * unchanged link means no file of it went away during the read, and what `read` returned (a value or an error) is
 * about the checkpoint. A changed link means the generation may have vanished under the reader (a missing file,
 * ENOENT, a manifest entry without its file): that is another run saving, not damage, so whatever was read is
 * released and the read starts over from the new link, up to `READ_TRIES` times.
 */
export function readGeneration<A>(
  path: string,
  read: (resolved: string) => TE.TaskEither<CheckpointError, A>,
  release: (value: A) => void,
): TE.TaskEither<CheckpointError, A> {
  return async () => {
    for (let attempt = 0; attempt < READ_TRIES; attempt++) {
      const resolved = await resolveDir(path);
      await readHooks.afterResolve?.(resolved, attempt);
      const res = await read(resolved)();
      const now = await resolveDir(path).catch(() => null);
      if (now === resolved) return res;
      if (E.isRight(res)) release(res.right);
    }
    return E.left(
      new CheckpointError(
        'io',
        path,
        `was replaced ${READ_TRIES} times while it was being read (another run is saving to it); try again`,
      ),
    );
  };
}

/** Load a checkpoint directory; the optimizer and trainer state are optional (absent for weights-only exports). */
export function loadCheckpoint(
  path: string,
  opts: CheckpointLoadOptions = {},
): TE.TaskEither<CheckpointError, Checkpoint> {
  return readGeneration(
    path,
    (resolved) => loadGeneration(path, resolved, opts),
    (ck) => dispose([ck.params, ck.optimizer]),
  );
}

function loadGeneration(
  path: string,
  resolved: string,
  opts: CheckpointLoadOptions,
): TE.TaskEither<CheckpointError, Checkpoint> {
  return pipe(
    openDir(path, resolved),
    TE.bindTo('dir'),
    TE.bind('config', ({ dir }) => readCheckpointConfig(dir)),
    TE.bind('params', ({ dir, config }) => loadParams(join(dir, CHECKPOINT_FILES.model), config, opts)),
    TE.bind('rest', ({ dir, config, params }) =>
      pipe(
        TE.Do,
        TE.bind('optimizer', () => loadOptimizer(join(dir, CHECKPOINT_FILES.optimizer), config, opts)),
        TE.bind('state', ({ optimizer }) =>
          pipe(
            loadState(join(dir, CHECKPOINT_FILES.state)),
            TE.orElseFirst(() => TE.fromIO(() => dispose(optimizer))),
          ),
        ),
        // What was uploaded is of no use to a caller who gets an error: free it.
        TE.orElseFirst(() => TE.fromIO(() => dispose(params))),
      ),
    ),
    TE.map(({ config, params, rest: { optimizer, state } }) => ({
      config,
      params,
      ...(optimizer ? { optimizer } : {}),
      rngs: state.rngs,
      trainerState: state.trainerState,
    })),
  );
}

function loadParams(
  path: string,
  config: TransformerConfig,
  opts: CheckpointLoadOptions,
): TE.TaskEither<CheckpointError, TransformerParams> {
  return pipe(
    indexOf(path),
    TE.chainFirstEitherK((index) => checkHfNames(index.entries, config)),
    TE.chain((index) => uploadTrees(index, config, opts, [''])),
    TE.map(([params]) => params!),
  );
}

function loadOptimizer(
  path: string,
  config: TransformerConfig,
  opts: CheckpointLoadOptions,
): TE.TaskEither<CheckpointError, OptimizerState<TransformerParams> | null> {
  return pipe(
    TE.fromTask(() => exists(path)),
    TE.chain((present) =>
      !present
        ? TE.right(null)
        : pipe(
            indexOf(path),
            TE.chainEitherK((index) => {
              const stray = [...index.entries.keys()].find(
                (n) => !n.startsWith('exp_avg.') && !n.startsWith('exp_avg_sq.'),
              );
              if (stray)
                return E.left(
                  new CheckpointError(
                    'unexpected-tensor',
                    stray,
                    'optimizer tensors are named exp_avg.* or exp_avg_sq.*',
                  ),
                );
              return pipe(
                optimizerStep(index.metadata),
                E.chainFirst(() => checkHfNames(index.entries, config, 'exp_avg.')),
                E.chainFirst(() => checkHfNames(index.entries, config, 'exp_avg_sq.')),
                E.map((step) => ({ index, step })),
              );
            }),
            TE.chain(({ index, step }) =>
              pipe(
                uploadTrees(index, config, opts, ['exp_avg.', 'exp_avg_sq.'], negativeMoment),
                TE.map(([m, v]): OptimizerState<TransformerParams> => ({ step, m: m!, v: v! })),
              ),
            ),
          ),
    ),
  );
}

/** The optimizer's step count, as its file's metadata records it (a LoRA checkpoint's too). */
export function optimizerStep(metadata: Readonly<Record<string, string>>): E.Either<CheckpointError, number> {
  const step = Number(metadata.step);
  return Number.isSafeInteger(step) && step >= 0
    ? E.right(step)
    : E.left(
        new CheckpointError(
          'bad-state',
          'optimizer __metadata__.step',
          `expected a step count, got ${JSON.stringify(metadata.step)}`,
        ),
      );
}

/** A second moment is a mean of squares: a negative one makes AdamW's sqrt NaN. */
export function negativeMoment(name: string, t: HostTensor): CheckpointError | null {
  if (!name.startsWith('exp_avg_sq.')) return null;
  const i = t.data.findIndex((x) => x < 0);
  if (i < 0) return null;
  return new CheckpointError('bad-state', name, `holds ${t.data[i]} at flat index ${i}; second moments are >= 0`);
}

export interface SavedState {
  readonly rngs: Record<string, RngState>;
  readonly trainerState: Json;
}

export function loadState(path: string): TE.TaskEither<CheckpointError, SavedState> {
  return pipe(
    TE.fromTask(() => exists(path)),
    TE.chain((present) =>
      present ? pipe(readJson(path), TE.chainEitherK(parseState)) : TE.right({ rngs: {}, trainerState: null }),
    ),
  );
}

const isU32 = (x: unknown): boolean => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < 2 ** 32;

export function parseState(json: unknown): E.Either<CheckpointError, SavedState> {
  if (typeof json !== 'object' || json === null)
    return E.left(new CheckpointError('bad-state', 'trainer_state.json', 'is not an object'));
  const { format, rngs, trainerState } = json as { format?: unknown; rngs?: unknown; trainerState?: Json };
  if (format !== FORMAT)
    return E.left(
      new CheckpointError(
        'bad-state',
        'format',
        `is ${JSON.stringify(format)}, expected "${FORMAT}"`,
        CHECKPOINT_FILES.state,
      ),
    );
  const out: Record<string, RngState> = {};
  if (rngs !== undefined) {
    if (typeof rngs !== 'object' || rngs === null)
      return E.left(new CheckpointError('bad-state', 'rngs', 'is not an object'));
    for (const [name, st] of Object.entries(rngs)) {
      const { s, spare } = (st ?? {}) as { s?: unknown; spare?: unknown };
      if (
        !Array.isArray(s) ||
        s.length !== 4 ||
        !s.every(isU32) ||
        !(spare === null || (typeof spare === 'number' && Number.isFinite(spare)))
      ) {
        return E.left(
          new CheckpointError('bad-state', `rngs.${name}`, 'expected { s: [4 x u32], spare: finite number | null }'),
        );
      }
      // xoshiro's one fixed point: from an all-zero state it draws 0 forever.
      if (s.every((w) => w === 0))
        return E.left(new CheckpointError('bad-state', `rngs.${name}`, 'is the all-zero state, which never leaves 0'));
      out[name] = { s: s as unknown as RngState['s'], spare };
    }
  }
  return E.right({ rngs: out, trainerState: trainerState ?? null });
}
