import { access, join, mkdir, readFile, rename, writeFile } from '../platform/files.js';
import * as E from 'fp-ts/lib/Either.js';
import * as TE from 'fp-ts/lib/TaskEither.js';
import { pipe } from 'fp-ts/lib/function.js';
import type { RngState } from '../core/rng.js';
import type { Tensor } from '../core/tensor.js';
import { fromHfConfig, fromHfNames, toHfConfig, toHfNames, type LoadOptions } from './hf.js';
import type { OptimizerState } from './optim.js';
import { CheckpointError, decodeSafetensors, encodeSafetensors, type HostTensor } from './safetensors.js';
import type { TransformerConfig, TransformerParams } from './transformer.js';

/**
 * A training checkpoint is a directory: `config.json` (Hugging Face LlamaConfig fields), `model.safetensors`
 * (Hugging Face Llama names, so other tools can read the weights), `optimizer.safetensors` (AdamW moments under
 * `exp_avg.<name>` and `exp_avg_sq.<name>`, the step count in the metadata) and `trainer_state.json` (named RNG
 * states and whatever JSON the trainer keeps). Each file is written to a temporary name and renamed, so a run
 * killed during a save leaves the previous file whole. Restoring all of it resumes a run exactly.
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
  for (const [name, t] of named) out.set(prefix + name, { dtype: t.dtype, shape: t.shape, data: await t.data() });
  return out;
}

const io = (field: string) => (e: unknown): CheckpointError => new CheckpointError('io', field, e instanceof Error ? e.message : String(e));

async function writeAtomic(path: string, data: Uint8Array | string): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}

export function saveCheckpoint(dir: string, ckpt: Checkpoint): TE.TaskEither<CheckpointError, void> {
  return TE.tryCatch(async () => {
    await mkdir(dir, { recursive: true });
    const model = await hostTensors(toHfNames(ckpt.params));
    const dtypes = [...new Set([...model.values()].map((t) => t.dtype))].join(',');
    await writeAtomic(join(dir, CHECKPOINT_FILES.model), encodeSafetensors(model, { format: 'pt', producer: FORMAT, dtypes }));
    if (ckpt.optimizer) {
      const moments = new Map([...(await hostTensors(toHfNames(ckpt.optimizer.m), 'exp_avg.')), ...(await hostTensors(toHfNames(ckpt.optimizer.v), 'exp_avg_sq.'))]);
      await writeAtomic(join(dir, CHECKPOINT_FILES.optimizer), encodeSafetensors(moments, { step: String(ckpt.optimizer.step), producer: FORMAT }));
    }
    const torchDtype = ckpt.params.embed.weight.dtype === 'f64' ? 'float64' : 'float32';
    await writeAtomic(join(dir, CHECKPOINT_FILES.config), JSON.stringify({ ...toHfConfig(ckpt.config), torch_dtype: torchDtype }, null, 2));
    const state = { format: FORMAT, rngs: ckpt.rngs ?? {}, trainerState: ckpt.trainerState ?? null };
    await writeAtomic(join(dir, CHECKPOINT_FILES.state), JSON.stringify(state, null, 2));
  }, io(dir));
}

const exists = (path: string): Promise<boolean> => access(path).then(() => true, () => false);

const readBytes = (path: string): TE.TaskEither<CheckpointError, Uint8Array> => TE.tryCatch(() => readFile(path), io(path));

const readJson = (path: string): TE.TaskEither<CheckpointError, unknown> =>
  pipe(
    TE.tryCatch(() => readFile(path, 'utf8'), io(path)),
    TE.chainEitherK((text) => E.tryCatch(() => JSON.parse(text) as unknown, (e) => new CheckpointError('bad-state', path, `not valid JSON (${(e as Error).message})`))),
  );

/** Load a checkpoint directory; the optimizer and trainer state are optional (absent for weights-only exports). */
export function loadCheckpoint(dir: string, opts: LoadOptions = {}): TE.TaskEither<CheckpointError, Checkpoint> {
  return pipe(
    TE.Do,
    TE.bind('config', () => pipe(readJson(join(dir, CHECKPOINT_FILES.config)), TE.chainEitherK(fromHfConfig))),
    TE.bind('params', ({ config }) =>
      pipe(readBytes(join(dir, CHECKPOINT_FILES.model)), TE.chainEitherK(decodeSafetensors), TE.chainEitherK((f) => fromHfNames(f.tensors, config, opts))),
    ),
    TE.bind('optimizer', ({ config }) => loadOptimizer(join(dir, CHECKPOINT_FILES.optimizer), config, opts)),
    TE.bind('state', () => loadState(join(dir, CHECKPOINT_FILES.state))),
    TE.map(({ config, params, optimizer, state }) => ({ config, params, ...(optimizer ? { optimizer } : {}), rngs: state.rngs, trainerState: state.trainerState })),
  );
}

function loadOptimizer(path: string, config: TransformerConfig, opts: LoadOptions): TE.TaskEither<CheckpointError, OptimizerState<TransformerParams> | null> {
  return pipe(
    TE.fromTask(() => exists(path)),
    TE.chain((present) =>
      !present
        ? TE.right(null)
        : pipe(
            readBytes(path),
            TE.chainEitherK(decodeSafetensors),
            TE.chainEitherK((f) => {
              const stray = [...f.tensors.keys()].find((n) => !n.startsWith('exp_avg.') && !n.startsWith('exp_avg_sq.'));
              if (stray) return E.left(new CheckpointError('unexpected-tensor', stray, 'optimizer tensors are named exp_avg.* or exp_avg_sq.*'));
              const step = Number(f.metadata.step);
              if (!Number.isSafeInteger(step) || step < 0) return E.left(new CheckpointError('bad-state', 'optimizer __metadata__.step', `expected a step count, got ${JSON.stringify(f.metadata.step)}`));
              return pipe(
                E.Do,
                E.bind('m', () => fromHfNames(f.tensors, config, { ...opts, prefix: 'exp_avg.' })),
                E.bind('v', () => fromHfNames(f.tensors, config, { ...opts, prefix: 'exp_avg_sq.' })),
                E.map(({ m, v }): OptimizerState<TransformerParams> => ({ step, m, v })),
              );
            }),
          ),
    ),
  );
}

export interface SavedState {
  readonly rngs: Record<string, RngState>;
  readonly trainerState: Json;
}

function loadState(path: string): TE.TaskEither<CheckpointError, SavedState> {
  return pipe(
    TE.fromTask(() => exists(path)),
    TE.chain((present) => (present ? pipe(readJson(path), TE.chainEitherK(parseState)) : TE.right({ rngs: {}, trainerState: null }))),
  );
}

const isU32 = (x: unknown): boolean => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < 2 ** 32;

export function parseState(json: unknown): E.Either<CheckpointError, SavedState> {
  if (typeof json !== 'object' || json === null) return E.left(new CheckpointError('bad-state', 'trainer_state.json', 'is not an object'));
  const { rngs, trainerState } = json as { rngs?: unknown; trainerState?: Json };
  const out: Record<string, RngState> = {};
  if (rngs !== undefined) {
    if (typeof rngs !== 'object' || rngs === null) return E.left(new CheckpointError('bad-state', 'rngs', 'is not an object'));
    for (const [name, st] of Object.entries(rngs)) {
      const { s, spare } = (st ?? {}) as { s?: unknown; spare?: unknown };
      if (!Array.isArray(s) || s.length !== 4 || !s.every(isU32) || !(spare === null || typeof spare === 'number')) {
        return E.left(new CheckpointError('bad-state', `rngs.${name}`, 'expected { s: [4 x u32], spare: number | null }'));
      }
      out[name] = { s: s as unknown as RngState['s'], spare };
    }
  }
  return E.right({ rngs: out, trainerState: trainerState ?? null });
}
