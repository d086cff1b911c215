import type { Tensor } from '../core/tensor.js';
import { headDim, type TransformerConfig } from './config.js';

/**
 * How `initParams` starts a parameter: normal(0, std) (embeddings and projections), the same scaled by
 * 1/sqrt(2 nLayers) for the projections that write into the residual stream (GPT-2's, so the stream does not grow
 * with depth), or a constant (norm gains at 1, biases at 0).
 */
export type Init = 'normal' | 'residual' | 'ones' | 'zeros';

/** One row of the parameter tables. */
export interface Parameter {
  /** Its shape for a config (a linear weight is [out, in], as Hugging Face stores it). */
  readonly shape: (c: TransformerConfig) => number[];
  readonly init: Init;
  /** Its Hugging Face name; a layer's is under `model.layers.<l>.`. */
  readonly hf: string;
  /** The peft target module that adapts it (an adaptable linear's weight only). */
  readonly lora?: string;
  /** Whether a config has it; a parameter without `when` is in every model. */
  readonly when?: (c: TransformerConfig) => boolean;
}

const qOut = (c: TransformerConfig): number => c.nHeads * headDim(c);
const kvOut = (c: TransformerConfig): number => c.nKvHeads * headDim(c);
const qkvBias = (c: TransformerConfig): boolean => Boolean(c.qkvBias);
const qkNorm = (c: TransformerConfig): boolean => Boolean(c.qkNorm);

/**
 * A layer's parameters, the one statement of them (as llm.c's `ParameterTensors`): our key, shape, init, Hugging Face
 * name and LoRA module. `LayerParams`, the Hugging Face names (`io/hf.ts`), the LoRA modules and the weights they
 * adapt (`LORA_MODULES`, `MODULE_WEIGHT`, peft's names in `io/adapter-files.ts`), `paramShapes` and `initParams`
 * are read from it. Its order is the order of every walk over the parameters: `initParams` draws in it, so a row is
 * never moved, and a new optional one goes last (a config without it draws exactly as before). Qwen2 adds the q/k/v
 * biases, Qwen3 the per-head q/k RMSNorm gains; left out, the layer is Llama's.
 */
export const LAYER_PARAMETERS = {
  attnNorm: { shape: (c) => [c.dModel], init: 'ones', hf: 'input_layernorm.weight' },
  wq: { shape: (c) => [qOut(c), c.dModel], init: 'normal', hf: 'self_attn.q_proj.weight', lora: 'q_proj' },
  wk: { shape: (c) => [kvOut(c), c.dModel], init: 'normal', hf: 'self_attn.k_proj.weight', lora: 'k_proj' },
  wv: { shape: (c) => [kvOut(c), c.dModel], init: 'normal', hf: 'self_attn.v_proj.weight', lora: 'v_proj' },
  wo: { shape: (c) => [c.dModel, qOut(c)], init: 'residual', hf: 'self_attn.o_proj.weight', lora: 'o_proj' },
  mlpNorm: { shape: (c) => [c.dModel], init: 'ones', hf: 'post_attention_layernorm.weight' },
  wGate: { shape: (c) => [c.dFf, c.dModel], init: 'normal', hf: 'mlp.gate_proj.weight', lora: 'gate_proj' },
  wUp: { shape: (c) => [c.dFf, c.dModel], init: 'normal', hf: 'mlp.up_proj.weight', lora: 'up_proj' },
  wDown: { shape: (c) => [c.dModel, c.dFf], init: 'residual', hf: 'mlp.down_proj.weight', lora: 'down_proj' },
  bq: { shape: (c) => [qOut(c)], init: 'zeros', hf: 'self_attn.q_proj.bias', when: qkvBias },
  bk: { shape: (c) => [kvOut(c)], init: 'zeros', hf: 'self_attn.k_proj.bias', when: qkvBias },
  bv: { shape: (c) => [kvOut(c)], init: 'zeros', hf: 'self_attn.v_proj.bias', when: qkvBias },
  qNorm: { shape: (c) => [headDim(c)], init: 'ones', hf: 'self_attn.q_norm.weight', when: qkNorm },
  kNorm: { shape: (c) => [headDim(c)], init: 'ones', hf: 'self_attn.k_norm.weight', when: qkNorm },
} as const satisfies Record<string, Parameter>;

/**
 * The parameters outside the layers, in the order of every walk: the embedding before the layers, the final norm
 * and an untied LM head after them. A tied head (the default) is `embed.weight` and has no tensor of its own.
 */
export const MODEL_PARAMETERS = {
  embed: { shape: (c) => [c.vocabSize, c.dModel], init: 'normal', hf: 'model.embed_tokens.weight' },
  finalNorm: { shape: (c) => [c.dModel], init: 'ones', hf: 'model.norm.weight' },
  lmHead: {
    shape: (c) => [c.vocabSize, c.dModel],
    init: 'normal',
    hf: 'lm_head.weight',
    when: (c) => c.tieEmbeddings === false,
  },
} as const satisfies Record<string, Parameter>;

type LayerTable = typeof LAYER_PARAMETERS;
export type LayerKey = keyof LayerTable;
type OptionalKey = { [K in LayerKey]: LayerTable[K] extends { readonly when: unknown } ? K : never }[LayerKey];
type Flat<T> = { [K in keyof T]: T[K] };

/** A layer's parameters with leaves of type T: every key of the table, those with a `when` optional. */
export type LayerOf<T> = Flat<
  { readonly [K in Exclude<LayerKey, OptionalKey>]: T } & { readonly [K in OptionalKey]?: T }
>;

/** One block's parameters (the rows of `LAYER_PARAMETERS`). Linear weights are [out, in]. */
export type LayerParams = LayerOf<Tensor>;

/** The parameter pytree of a config with leaves of type T (`TransformerParams` is this of tensors, plus LoRA). */
export type ParamsOf<T> = {
  readonly embed: { readonly weight: T };
  readonly layers: readonly LayerOf<T>[];
  readonly finalNorm: T;
  readonly lmHead?: { readonly weight: T };
};

/** A pytree shaped like the parameters, with leaves of any type (tensors, moments, shapes). */
export interface ParamsLike<T> {
  readonly embed: { readonly weight: T };
  readonly layers: readonly { readonly [K in LayerKey]?: T }[];
  readonly finalNorm: T;
  readonly lmHead?: { readonly weight: T };
}

/** The table's keys, in its order. */
export const LAYER_KEYS = Object.keys(LAYER_PARAMETERS) as LayerKey[];

/** A layer's row of the table (typed as a row, whichever key). */
export const layerParameter = (key: LayerKey): Parameter => LAYER_PARAMETERS[key];

const has = (p: Parameter, c: TransformerConfig): boolean => p.when === undefined || p.when(c);

/** The Hugging Face name of layer `l`'s parameter `key`. */
export const layerHfName = (l: number, key: LayerKey): string => `model.layers.${l}.${LAYER_PARAMETERS[key].hf}`;

/**
 * The parameter pytree of a config with `f` of each parameter (its row and full Hugging Face name) as its leaf, `f`
 * called in the tables' order: the embedding, each layer's rows, the final norm, the LM head.
 */
export function mapParameters<T>(c: TransformerConfig, f: (p: Parameter, hfName: string) => T): ParamsOf<T> {
  const m: Readonly<Record<keyof typeof MODEL_PARAMETERS, Parameter>> = MODEL_PARAMETERS;
  const embed = { weight: f(m.embed, m.embed.hf) };
  const keys = LAYER_KEYS.filter((k) => has(layerParameter(k), c));
  const layers: LayerOf<T>[] = [];
  for (let l = 0; l < c.nLayers; l++) {
    layers.push(Object.fromEntries(keys.map((k) => [k, f(layerParameter(k), layerHfName(l, k))])) as LayerOf<T>);
  }
  const finalNorm = f(m.finalNorm, m.finalNorm.hf);
  return { embed, layers, finalNorm, ...(has(m.lmHead, c) ? { lmHead: { weight: f(m.lmHead, m.lmHead.hf) } } : {}) };
}

/** The shape of every parameter of a config, as a pytree (the optional tensors only where the config has them). */
export const paramShapes = (config: TransformerConfig): ParamsOf<number[]> =>
  mapParameters(config, (p) => p.shape(config));

/** A peft target module: the `lora` of a row of `LAYER_PARAMETERS` (an adaptable linear). */
export type LoraModule = {
  [K in LayerKey]: LayerTable[K] extends { readonly lora: infer M extends string } ? M : never;
}[LayerKey];

/** The target modules in the table's order, which is the order adapters are drawn and saved in. */
export const LORA_MODULES: readonly LoraModule[] = LAYER_KEYS.flatMap((k) => {
  const m = layerParameter(k).lora;
  return m === undefined ? [] : [m as LoraModule];
});

type ModuleWeight = {
  readonly [M in LoraModule]: { [K in LayerKey]: LayerTable[K] extends { readonly lora: M } ? K : never }[LayerKey];
};

/** Which parameter of a layer each target module adapts. */
export const MODULE_WEIGHT = Object.fromEntries(
  LAYER_KEYS.flatMap((k) => {
    const m = layerParameter(k).lora;
    return m === undefined ? [] : [[m, k]];
  }),
) as ModuleWeight;
