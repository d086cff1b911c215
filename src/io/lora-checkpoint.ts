import * as E from 'fp-ts/lib/Either.js';
import * as TE from 'fp-ts/lib/TaskEither.js';
import type { Backend } from '../core/backend.js';
import type { RngState } from '../core/rng.js';
import { dispose } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { crashPoint } from '../platform/host.js';
import { FileSystemError } from '../platform/errors.js';
import { access, join, writeFile } from '../platform/files.js';
import type { LoraLayer } from '../nn/adapters.js';
import type { LoraModule } from '../nn/parameters.js';
import { writeDirAtomic } from './atomic-dir.js';
import {
  CHECKPOINT_FILES,
  FORMAT,
  type Json,
  loadState,
  negativeMoment,
  openDir,
  optimizerStep,
  readCheckpointConfig,
  readGeneration,
} from './checkpoint.js';
import { toHfConfig, toHfNames } from './hf.js';
import { loadHfCheckpoint } from './hf-checkpoint.js';
import { ADAPTER_FILES, peftName, peftNames, readAdapter, writeAdapterFiles } from './adapter-files.js';
import type { LoraConfig } from '../nn/lora.js';
import type { OptimizerState } from '../nn/optim.js';
import { CheckpointError } from './safetensors.js';
import { readSafetensorsIndex, streamTensors, tensorsToWrite, writeSafetensorsFile } from './safetensors-file.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';

/**
 * A training checkpoint of a LoRA run holds what the run trains and nothing it does not: `adapter_config.json` and
 * `adapter_model.safetensors` (peft's layout, as `OUTPUT/adapter`), `optimizer.safetensors` (AdamW moments of the
 * adapters under `exp_avg.<peft name>` / `exp_avg_sq.<peft name>`, the step in the metadata), `config.json` (the
 * base model's), `trainer_state.json` and the manifest; the frozen base weights are written only when they exist
 * nowhere else (a new model's, `model.safetensors`), and otherwise come from `--model` on resume. Written whole or
 * not at all, as every checkpoint (`writeDirAtomic`).
 */
export interface LoraCheckpoint {
  readonly config: TransformerConfig;
  readonly lora: LoraConfig;
  /** The policy: base weights with the adapters (`params.lora`). */
  readonly params: TransformerParams;
  readonly optimizer: OptimizerState<readonly LoraLayer[]>;
  readonly rngs: Readonly<Record<string, RngState>>;
  readonly trainerState: Json;
}

export interface LoraSaveOptions {
  /** Write the base weights too (a new model's, which no directory holds). */
  readonly withBase: boolean;
  /** `base_model_name_or_path` of the adapter config. */
  readonly baseModel: string | null;
}

const io = (field: string, e: unknown): CheckpointError =>
  e instanceof CheckpointError ? e : new CheckpointError('io', field, FileSystemError.from(field, e).message);

export function saveLoraCheckpoint(
  dir: string,
  ck: LoraCheckpoint,
  opts: LoraSaveOptions,
): TE.TaskEither<CheckpointError, void> {
  return TE.tryCatch(
    () =>
      writeDirAtomic(dir, async (tmp) => {
        await writeAdapterFiles(tmp, ck.params.lora!, ck.lora, opts.baseModel);
        crashPoint('checkpoint:file');
        const moments = [
          ...tensorsToWrite(peftNames(ck.optimizer.m), { prefix: 'exp_avg.' }),
          ...tensorsToWrite(peftNames(ck.optimizer.v), { prefix: 'exp_avg_sq.' }),
        ];
        const meta = { step: String(ck.optimizer.step), producer: FORMAT };
        await writeSafetensorsFile(join(tmp, CHECKPOINT_FILES.optimizer), moments, 'F32', meta);
        crashPoint('checkpoint:file');
        if (opts.withBase) {
          await writeSafetensorsFile(join(tmp, CHECKPOINT_FILES.model), tensorsToWrite(toHfNames(ck.params)), 'F32', {
            format: 'pt',
            producer: FORMAT,
          });
          crashPoint('checkpoint:file');
        }
        const hfConfig = { ...toHfConfig(ck.config), torch_dtype: 'float32' };
        await writeFile(join(tmp, CHECKPOINT_FILES.config), JSON.stringify(hfConfig, null, 2));
        const state = { format: FORMAT, rngs: ck.rngs, trainerState: ck.trainerState };
        await writeFile(join(tmp, CHECKPOINT_FILES.state), JSON.stringify(state, null, 2));
        crashPoint('checkpoint:file');
      }),
    (e) => io(dir, e),
  );
}

/** Whether a checkpoint directory is a LoRA run's: its generation, read whole as a load reads it, has an adapter config. */
export async function isLoraCheckpoint(dir: string): Promise<boolean> {
  const holdsAdapter = (resolved: string) => () =>
    access(join(resolved, ADAPTER_FILES.config)).then(
      () => E.right(true),
      () => E.right(false),
    );
  const found = await readGeneration(dir, holdsAdapter, () => undefined)();
  return E.isRight(found) && found.right;
}

export interface LoraLoadOptions {
  readonly backend: Backend;
  /** The frozen base weights (from `--model`); absent, the checkpoint's own `model.safetensors` is loaded. */
  readonly base?: TransformerParams;
  readonly allowNonFinite?: boolean;
}

/**
 * Load a LoRA run's checkpoint onto `base` (or its own base weights): the manifest is verified first, then the
 * adapters and their moments are read by name and shape. The caller owns what it returns (the base it passed in
 * is shared, not copied).
 */
export function loadLoraCheckpoint(
  path: string,
  opts: LoraLoadOptions,
): TE.TaskEither<CheckpointError, LoraCheckpoint> {
  return readGeneration(
    path,
    (resolved) => loadLoraGeneration(path, resolved, opts),
    (ck) => dispose(opts.base ? [ck.params.lora, ck.optimizer] : [ck.params, ck.optimizer]),
  );
}

function loadLoraGeneration(
  path: string,
  resolved: string,
  opts: LoraLoadOptions,
): TE.TaskEither<CheckpointError, LoraCheckpoint> {
  return async () => {
    const opened = await openDir(path, resolved)();
    if (E.isLeft(opened)) return opened;
    const dir = opened.right;
    const saved = await readCheckpointConfig(dir)();
    if (E.isLeft(saved)) return saved;
    let base = opts.base;
    if (!base) {
      // A new model's base weights live in the checkpoint (in the Hub layout, read by the Hub loader).
      const own = await loadHfCheckpoint(dir, opts.backend, { allowNonFinite: opts.allowNonFinite ?? false })();
      if (E.isLeft(own)) return own;
      base = own.right.params;
    }
    const owned = opts.base ? null : base;
    const fail = <A>(e: E.Either<CheckpointError, A>): E.Either<CheckpointError, never> => {
      if (owned) dispose(owned);
      return e as E.Left<CheckpointError>;
    };
    const adapter = await readAdapter(dir, saved.right, opts.backend, { allowNonFinite: opts.allowNonFinite ?? false });
    if (E.isLeft(adapter)) return fail(adapter);
    const { config: lora, lora: weights } = adapter.right;
    const optimizer = await readMoments(join(dir, CHECKPOINT_FILES.optimizer), weights.layers, opts.backend);
    if (E.isLeft(optimizer)) {
      dispose(weights);
      return fail(optimizer);
    }
    const state = await loadState(join(dir, CHECKPOINT_FILES.state))();
    if (E.isLeft(state)) {
      dispose([weights, optimizer.right]);
      return fail(state);
    }
    return E.right({
      config: saved.right,
      lora,
      params: { ...base, lora: weights },
      optimizer: optimizer.right,
      rngs: state.right.rngs,
      trainerState: state.right.trainerState,
    });
  };
}

/** The adapters' AdamW moments, shaped as the adapters' layers; second moments must be >= 0. */
async function readMoments(
  path: string,
  layers: readonly LoraLayer[],
  backend: Backend,
): Promise<E.Either<CheckpointError, OptimizerState<readonly LoraLayer[]>>> {
  const file = CHECKPOINT_FILES.optimizer;
  const index = await readSafetensorsIndex(path);
  if (E.isLeft(index)) return index;
  const step = optimizerStep(index.right.metadata);
  if (E.isLeft(step)) return step;
  const wanted = new Map<string, readonly number[]>();
  for (const [name, t] of peftNames(layers)) {
    wanted.set(`exp_avg.${name}`, t.shape);
    wanted.set(`exp_avg_sq.${name}`, t.shape);
  }
  for (const [name, shape] of wanted) {
    const e = index.right.entries.get(name);
    if (!e) return E.left(new CheckpointError('missing-tensor', name, `expected shape [${shape.join(', ')}]`, file));
    if (e.shape.join(',') !== shape.join(','))
      return E.left(
        new CheckpointError('wrong-shape', name, `has shape [${e.shape.join(', ')}], expected [${shape}]`, file),
      );
  }
  for (const name of index.right.entries.keys())
    if (!wanted.has(name))
      return E.left(new CheckpointError('unexpected-tensor', name, 'is not a moment of these adapters', file));
  const loaded = new Map<string, Tensor>();
  try {
    await streamTensors(index.right, [...wanted.keys()], (name, t) => {
      const negative = negativeMoment(name, t);
      if (negative) throw negative;
      const i = t.data.findIndex((x) => !Number.isFinite(x));
      if (i >= 0) throw new CheckpointError('bad-state', name, `holds ${t.data[i]} at flat index ${i}`, file);
      loaded.set(name, tensor(Float32Array.from(t.data), t.shape, { dtype: 'f32', backend }));
    });
  } catch (e) {
    dispose([...loaded.values()]);
    return E.left(io(path, e));
  }
  const tree = (prefix: string): LoraLayer[] =>
    layers.map((layer, l) =>
      Object.fromEntries(
        (Object.keys(layer) as LoraModule[]).map((m) => [
          m,
          { a: loaded.get(prefix + peftName(l, m, 'A'))!, b: loaded.get(prefix + peftName(l, m, 'B'))! },
        ]),
      ),
    );
  return E.right({ step: step.right, m: tree('exp_avg.'), v: tree('exp_avg_sq.') });
}
