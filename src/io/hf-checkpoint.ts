import { basename, join, makeDirectories, readRegularFile, writeFile } from '../platform/files.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import { fileErrorLine } from '../platform/errors.js';
import * as E from 'fp-ts/lib/Either.js';
import * as TE from 'fp-ts/lib/TaskEither.js';
import type { Backend } from '../core/backend.js';
import type { DType, HalfDType, TypedArray } from '../core/dtype.js';
import { halfReader, saturateBf16 } from '../core/half.js';
import { getDefaultBackend } from '../core/runtime.js';
import { dispose } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { fromHalfBits, tensor } from '../ops/creation.js';
import { buildParams, expectedShapes, LM_HEAD, toHfNames } from './hf.js';
import { fromHfConfig, toHfConfig } from './hf-config.js';
import { CheckpointError, type HostTensor } from './safetensors.js';
import {
  readSafetensorsIndex,
  streamTensorsKeepingHalf,
  tensorsToWrite,
  writeSafetensorsFile,
  type HalfHostTensor,
  type SafetensorsIndex,
} from './safetensors-file.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';

/**
 * A Hugging Face Hub model directory, read and written: `config.json`, `model.safetensors` or shards
 * `model-0000k-of-0000n.safetensors` with `model.safetensors.index.json`, and `generation_config.json` (its
 * `eos_token_id` may be a list). Loading validates the config, every shard's header and every tensor's name and
 * shape before reading any data, then streams tensor by tensor to the backend. Errors are `CheckpointError`s
 * naming the file and the field or tensor. These functions read and write files in a given directory; making
 * a save atomic (a temporary directory, then a rename) is the caller's business.
 */
export const HF_FILES = {
  config: 'config.json',
  generation: 'generation_config.json',
  model: 'model.safetensors',
  index: 'model.safetensors.index.json',
} as const;

/** Files that travel with a model when it is saved elsewhere (the tokenizer and generation settings). */
export const COMPANION_FILES = [
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'generation_config.json',
  'chat_template.jinja',
  'vocab.json',
  'merges.txt',
] as const;

export interface HfModel {
  readonly config: TransformerConfig;
  readonly params: TransformerParams;
  /** Token ids from config.json / generation_config.json (generation_config wins, as in transformers). */
  readonly tokens: HfTokenIds;
}

export interface HfTokenIds {
  readonly bos: number | null;
  readonly pad: number | null;
  /** Every id that ends generation. */
  readonly eos: readonly number[];
}

export interface HfLoadOptions {
  /** Parameter dtype on the backend (default f32; bf16 and f16 are widened exactly). */
  readonly dtype?: DType;
  /**
   * Keep the matrices a checkpoint stores as BF16 or F16 (the embedding, the linear weights, an untied LM head)
   * in that dtype on the backend, uploaded from their 16-bit words without a round trip through f32: frozen weights
   * at half an f32 copy's memory, widened inside the kernels that read them (matmul, gather). Norm gains and biases
   * (1-D), and matrices stored as F32, get `dtype`. Such tensors get no gradient: a run that trains them loads
   * without this (default false: every tensor in `dtype`).
   */
  readonly keepDType?: boolean;
  /** Accept NaN or infinite weights (refused by default: kind 'non-finite', naming the tensor and file). */
  readonly allowNonFinite?: boolean;
}

/** The first word of a bf16/f16 tensor that encodes NaN or an infinity (all exponent bits set), as `nonFinite`. */
function nonFiniteHalf(name: string, dtype: HalfDType, words: Uint16Array, file: string): CheckpointError | null {
  const exponent = dtype === 'bf16' ? 0x7f80 : 0x7c00;
  for (let i = 0; i < words.length; i++)
    if ((words[i]! & exponent) === exponent) return nonFinite(name, [halfReader(dtype)(words[i]!)], file, i);
  return null;
}

/** The first NaN or infinity of a tensor read from `file`, as the error to refuse it with. */
function nonFinite(name: string, data: ArrayLike<number>, file: string, offset = 0): CheckpointError | null {
  for (let i = 0; i < data.length; i++) {
    if (!Number.isFinite(data[i]!))
      return new CheckpointError(
        'non-finite',
        name,
        `holds ${data[i]} at flat index ${i + offset} (--allow-non-finite-weights, or allowNonFinite, accepts it)`,
        file,
      );
  }
  return null;
}

/** A file of the directory that cannot be read: named by its whole path, with the cause. */
export const fileError = (path: string, e: unknown): CheckpointError => {
  if (e instanceof CheckpointError) return e;
  const file = basename(path);
  const kind = (e as NodeJS.ErrnoException)?.code === 'ENOENT' ? 'missing-file' : 'io';
  return new CheckpointError(kind, file, `cannot be read: ${fileErrorLine(path, e)}`, file);
};

async function readJson(dir: string, file: string, optional: boolean): Promise<E.Either<CheckpointError, unknown>> {
  let text: string;
  try {
    text = await readRegularFile(join(dir, file), 'utf8');
  } catch (e) {
    if (optional && (e as NodeJS.ErrnoException).code === 'ENOENT') return E.right(undefined);
    return E.left(fileError(join(dir, file), e));
  }
  return E.tryCatch(
    () => JSON.parse(text) as unknown,
    (e) => new CheckpointError('bad-config', file, `not valid JSON (${jsonSyntaxDetail(e)})`, file),
  );
}

/** Which file holds each tensor: the index's weight_map, or every name in the one model.safetensors. */
async function shardFiles(
  dir: string,
): Promise<E.Either<CheckpointError, { files: string[]; weightMap: Map<string, string> | null }>> {
  const index = await readJson(dir, HF_FILES.index, true);
  if (E.isLeft(index)) return index;
  if (index.right === undefined) return E.right({ files: [HF_FILES.model], weightMap: null });
  const map = (index.right as { weight_map?: unknown }).weight_map;
  if (typeof map !== 'object' || map === null || Object.values(map).some((f) => typeof f !== 'string')) {
    return E.left(
      new CheckpointError('bad-header', 'weight_map', 'is not a map from tensor names to file names', HF_FILES.index),
    );
  }
  const weightMap = new Map(Object.entries(map as Record<string, string>));
  return E.right({ files: [...new Set(weightMap.values())].sort(), weightMap });
}

/** Tensors a checkpoint may hold that this model does not use: RoPE buffers, and a tied head saved anyway. */
const ignorable = (name: string, config: TransformerConfig): boolean =>
  name.endsWith('.rotary_emb.inv_freq') || (name === LM_HEAD && config.tieEmbeddings !== false);

/** A shard name of the index: a plain file name in the directory (no path, no parent). */
const safeShardName = (f: string): boolean =>
  f.length > 0 && f.length <= 255 && !f.includes('/') && !f.includes('\\') && f !== '.' && f !== '..';

/** Check every expected tensor against the headers; the plan says which names to read from which file. */
function plan(
  config: TransformerConfig,
  shards: ReadonlyMap<string, SafetensorsIndex>,
  weightMap: Map<string, string> | null,
): E.Either<CheckpointError, Map<string, string[]>> {
  const shapes = expectedShapes(config);
  const byFile = new Map<string, string[]>([...shards.keys()].map((f) => [f, []]));
  for (const [name, shape] of shapes) {
    const file = weightMap ? weightMap.get(name) : HF_FILES.model;
    if (file === undefined)
      return E.left(
        new CheckpointError(
          'missing-tensor',
          name,
          `is not in the weight_map (expected shape [${shape.join(', ')}])`,
          HF_FILES.index,
        ),
      );
    const entry = shards.get(file)!.entries.get(name);
    if (!entry)
      return E.left(new CheckpointError('missing-tensor', name, `expected shape [${shape.join(', ')}]`, file));
    if (entry.shape.length !== shape.length || entry.shape.some((d, i) => d !== shape[i])) {
      return E.left(
        new CheckpointError(
          'wrong-shape',
          name,
          `has shape [${entry.shape.join(', ')}], expected [${shape.join(', ')}]`,
          file,
        ),
      );
    }
    if (entry.dtype === 'i32')
      return E.left(new CheckpointError('bad-dtype', name, 'a parameter must be a float tensor', file));
    byFile.get(file)!.push(name);
  }
  for (const [file, index] of shards) {
    for (const name of index.entries.keys()) {
      if (!shapes.has(name) && !ignorable(name, config))
        return E.left(
          new CheckpointError(
            'unexpected-tensor',
            name,
            'is not a parameter of this model (its config has no such tensor)',
            file,
          ),
        );
    }
  }
  return E.right(byFile);
}

const ids = (v: unknown): number[] | null => {
  const list = Array.isArray(v) ? v : v === undefined || v === null ? [] : [v];
  return list.every((x) => Number.isInteger(x) && x >= 0) ? (list as number[]) : null;
};

function tokenIds(
  config: Record<string, unknown>,
  generation: Record<string, unknown>,
): E.Either<CheckpointError, HfTokenIds> {
  const pick = (field: string): unknown => generation[field] ?? config[field];
  const file = generation.eos_token_id !== undefined ? HF_FILES.generation : HF_FILES.config;
  const eos = ids(pick('eos_token_id'));
  const bos = ids(pick('bos_token_id'));
  const pad = ids(pick('pad_token_id'));
  if (!eos)
    return E.left(
      new CheckpointError(
        'bad-config',
        'eos_token_id',
        `expected an id or a list of ids, got ${JSON.stringify(pick('eos_token_id'))}`,
        file,
      ),
    );
  if (!bos || bos.length > 1 || !pad || pad.length > 1)
    return E.left(
      new CheckpointError(
        'bad-config',
        !bos || bos.length > 1 ? 'bos_token_id' : 'pad_token_id',
        'expected one id or null',
        file,
      ),
    );
  return E.right({ eos, bos: bos[0] ?? null, pad: pad[0] ?? null });
}

/** Load a Hub model directory onto a backend (default: the default backend). */
export function loadHfCheckpoint(
  dir: string,
  backend: Backend = getDefaultBackend(),
  opts: HfLoadOptions = {},
): TE.TaskEither<CheckpointError, HfModel> {
  return async () => {
    const json = await readJson(dir, HF_FILES.config, false);
    if (E.isLeft(json)) return json;
    const config = fromHfConfig(json.right, HF_FILES.config);
    if (E.isLeft(config)) return config;
    const generation = await readJson(dir, HF_FILES.generation, true);
    if (E.isLeft(generation)) return generation;
    const tokens = tokenIds(json.right as Record<string, unknown>, (generation.right ?? {}) as Record<string, unknown>);
    if (E.isLeft(tokens)) return tokens;
    const layout = await shardFiles(dir);
    if (E.isLeft(layout)) return layout;
    const shards = new Map<string, SafetensorsIndex>();
    for (const file of layout.right.files) {
      if (!safeShardName(file))
        return E.left(
          new CheckpointError(
            'bad-header',
            'weight_map',
            `names ${JSON.stringify(file)}, not a file of the directory`,
            HF_FILES.index,
          ),
        );
      const index = await readSafetensorsIndex(join(dir, file));
      if (E.isLeft(index)) return index;
      shards.set(file, index.right);
    }
    const reads = plan(config.right, shards, layout.right.weightMap);
    if (E.isLeft(reads)) return reads;
    const loaded = new Map<string, Tensor>();
    const dtype = opts.dtype ?? 'f32';
    // Matrices only: a norm's gain or a bias is tiny and is read by ops that compute in f32.
    const keep = (_: string, entry: { readonly shape: readonly number[] }): boolean =>
      opts.keepDType === true && entry.shape.length === 2;
    try {
      for (const [file, names] of reads.right) {
        const use = (name: string, t: HostTensor | HalfHostTensor): void => {
          if ('words' in t) {
            const bad = opts.allowNonFinite ? null : nonFiniteHalf(name, t.dtype, t.words, file);
            if (bad) throw bad;
            loaded.set(name, fromHalfBits(t.words, t.shape, t.dtype, { backend }));
            return;
          }
          const bad = opts.allowNonFinite ? null : nonFinite(name, t.data, file);
          if (bad) throw bad;
          loaded.set(name, tensor(t.data, t.shape, { dtype, backend }));
        };
        await streamTensorsKeepingHalf(shards.get(file)!, names, use, keep);
      }
    } catch (e) {
      dispose([...loaded.values()]);
      return E.left(fileError(dir, e));
    }
    const params = buildParams(config.right, (name) => loaded.get(name)!) as TransformerParams;
    return E.right({ config: config.right, params, tokens: tokens.right });
  };
}

export interface HfSaveOptions {
  /** Stored dtype (default f32). bf16 rounds to nearest even, as real checkpoints ship. */
  readonly dtype?: 'f32' | 'bf16';
  /** Extra config.json fields (token ids, say); the model's own fields always win. */
  readonly extraConfig?: Readonly<Record<string, unknown>>;
  /**
   * A model directory whose tokenizer and generation files (COMPANION_FILES) are copied beside the weights: only
   * its regular files. A companion that is a symbolic link, or anything but a regular file, is not copied and is
   * named in `skippedCompanions`.
   */
  readonly companionsFrom?: string;
}

/** What a save left out or changed. */
export interface HfSaveResult {
  /** Companion files of `companionsFrom` not copied because they are not regular files (a link, a FIFO, ...). */
  readonly skippedCompanions: readonly string[];
  /** bf16 only: the tensors holding finite values past bf16's range, written as its largest (`saturateBf16`). */
  readonly saturated: readonly SaturatedTensor[];
}

/** A tensor some of whose values were written as bf16's largest finite value: its name and how many. */
export interface SaturatedTensor {
  readonly name: string;
  readonly count: number;
}

/** A tensor's values as a bf16 file holds them: finite past bf16's range saturated, noted in `saturated`. */
function inBf16Range(name: string, values: TypedArray, saturated: SaturatedTensor[]): Float32Array {
  const out = saturateBf16(values instanceof Float32Array ? values : Float32Array.from(values));
  if (out.count > 0) saturated.push({ name, count: out.count });
  return out.values;
}

/**
 * Write `config.json` and `model.safetensors` (Hugging Face names) into `dir`, one tensor in host memory at a
 * time, so `transformers` loads the directory as it is (`AutoModelForCausalLM.from_pretrained(dir)`).
 */
export function saveHfCheckpoint(
  dir: string,
  params: TransformerParams,
  config: TransformerConfig,
  opts: HfSaveOptions = {},
): TE.TaskEither<CheckpointError, HfSaveResult> {
  return TE.tryCatch(
    async () => {
      await makeDirectories(dir);
      const dtype = opts.dtype ?? 'f32';
      const saturated: SaturatedTensor[] = [];
      const named = tensorsToWrite(toHfNames(params)).map((t) =>
        dtype === 'bf16' ? { ...t, values: () => t.values().then((v) => inBf16Range(t.name, v, saturated)) } : t,
      );
      await writeSafetensorsFile(join(dir, HF_FILES.model), named, dtype === 'bf16' ? 'BF16' : 'F32', { format: 'pt' });
      const torchDtype = dtype === 'bf16' ? 'bfloat16' : 'float32';
      const json = toHfConfig(config, { ...opts.extraConfig, torch_dtype: torchDtype, dtype: torchDtype });
      await writeFile(join(dir, HF_FILES.config), `${JSON.stringify(json, null, 2)}\n`);
      const skippedCompanions: string[] = [];
      if (opts.companionsFrom) {
        for (const f of COMPANION_FILES) {
          // Only a regular file of the directory itself is copied: a link (opened with O_NOFOLLOW, so it is never
          // followed, to ~/.ssh or anywhere) or a FIFO, device or directory is skipped and reported, not refused.
          // Skipped rather than refused because the save comes at the end of a run: the weights are what was
          // trained, and a companion is an extra the caller can copy by hand once told it was left out.
          const data = await readRegularFile(join(opts.companionsFrom, f), { noFollow: true }).catch(
            (e: NodeJS.ErrnoException) => {
              if (e.code === 'ENOENT') return null;
              if (e.code === 'ELOOP' || e.code === 'ENOTREG') {
                skippedCompanions.push(f);
                return null;
              }
              throw fileError(join(opts.companionsFrom!, f), e);
            },
          );
          if (data !== null) await writeFile(join(dir, f), data);
        }
      }
      return { skippedCompanions, saturated };
    },
    (e) => (e instanceof CheckpointError ? e : new CheckpointError('io', dir, fileErrorLine(dir, e))),
  );
}
