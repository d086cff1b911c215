import * as E from 'fp-ts/lib/Either.js';
import type { Backend } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import { getDefaultBackend } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { CheckpointError, type HostTensor } from './safetensors.js';
import {
  LAYER_KEYS,
  layerHfName,
  mapParameters,
  MODEL_PARAMETERS,
  type ParamsLike,
  paramShapes,
} from '../nn/parameters.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';

/**
 * The Hugging Face names of the parameters are their rows' in the model's tables (`nn/parameters.ts`; Llama, Qwen2
 * and Qwen3 share them, Qwen2 adds q/k/v biases, Qwen3 q/k norms). Linear weights are [out, in] on both sides, so no
 * transposes. A tied LM head has no tensor of its own (tie_word_embeddings: true); an untied one is `lm_head.weight`.
 */
export const LM_HEAD = MODEL_PARAMETERS.lmHead.hf;

/** Every parameter under its Hugging Face name (for pytrees shaped like the parameters: moments too). */
export function toHfNames<T>(params: ParamsLike<T>): Map<string, T> {
  const out = new Map<string, T>([[MODEL_PARAMETERS.embed.hf, params.embed.weight]]);
  params.layers.forEach((layer, l) => {
    for (const key of LAYER_KEYS) {
      if (layer[key] !== undefined) out.set(layerHfName(l, key), layer[key]);
    }
  });
  out.set(MODEL_PARAMETERS.finalNorm.hf, params.finalNorm);
  if (params.lmHead) out.set(LM_HEAD, params.lmHead.weight);
  return out;
}

/** The expected shape of every Hugging Face name for a config. */
export function expectedShapes(config: TransformerConfig): Map<string, number[]> {
  return toHfNames(paramShapes(config));
}

/** Build the parameter pytree from a function that gives the tensor of each Hugging Face name. */
export function buildParams<T>(config: TransformerConfig, load: (hfName: string) => T): ParamsLike<T> {
  return mapParameters(config, (_, hfName) => load(hfName));
}

export interface LoadOptions {
  readonly backend?: Backend;
  /** Convert every tensor to this dtype; default: as stored (F32 -> f32, F64 -> f64, BF16/F16 -> f32). */
  readonly dtype?: DType;
  /** Prefix of the names (`exp_avg.` for optimizer moments); default none. */
  readonly prefix?: string;
}

/**
 * Check named tensors (their dtype and shape; the data need not be read yet) against a config: every expected
 * tensor is there with its shape and a float dtype, and nothing else under `prefix` is (an untied lm_head or a
 * bias this model lacks is an error, not silently dropped).
 */
export function checkHfNames(
  tensors: ReadonlyMap<string, { readonly dtype: DType; readonly shape: readonly number[] }>,
  config: TransformerConfig,
  prefix = '',
): E.Either<CheckpointError, void> {
  const shapes = expectedShapes(config);
  for (const name of tensors.keys()) {
    if (name.startsWith(prefix) && !shapes.has(name.slice(prefix.length))) {
      const why = 'is not a parameter of this model (its config has no such tensor)';
      return E.left(new CheckpointError('unexpected-tensor', name, why));
    }
  }
  for (const [name, shape] of shapes) {
    const t = tensors.get(prefix + name);
    if (!t) return E.left(new CheckpointError('missing-tensor', prefix + name, `expected shape [${shape.join(', ')}]`));
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      return E.left(
        new CheckpointError(
          'wrong-shape',
          prefix + name,
          `has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`,
        ),
      );
    }
    if (t.dtype === 'i32')
      return E.left(new CheckpointError('bad-dtype', prefix + name, 'a parameter must be a float tensor'));
  }
  return E.right(undefined);
}

/** Build the parameter pytree from named host tensors, checked first by `checkHfNames`. */
export function fromHfNames(
  tensors: ReadonlyMap<string, HostTensor>,
  config: TransformerConfig,
  opts: LoadOptions = {},
): E.Either<CheckpointError, TransformerParams> {
  const prefix = opts.prefix ?? '';
  const checked = checkHfNames(tensors, config, prefix);
  if (E.isLeft(checked)) return checked;
  const backend = opts.backend ?? getDefaultBackend();
  const up = (name: string): Tensor => {
    const t = tensors.get(prefix + name)!;
    const dtype = opts.dtype ?? t.dtype;
    return tensor(t.data, t.shape, { dtype, backend });
  };
  return E.right(buildParams(config, up) as TransformerParams);
}

export { toHfConfig, fromHfConfig, architectureOf, ARCHITECTURES, type Architecture } from './hf-config.js';
