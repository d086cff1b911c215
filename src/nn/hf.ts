import * as E from 'fp-ts/lib/Either.js';
import type { Backend } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import { getDefaultBackend } from '../core/runtime.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { CheckpointError, type HostTensor } from './safetensors.js';
import { headDim, validateConfig, type LayerParams, type TransformerConfig, type TransformerParams } from './transformer.js';

/**
 * The Hugging Face Llama names of the parameters (Qwen2 uses the same ones, plus q/k/v biases this model does
 * not have). Linear weights are [out, in] on both sides, so no transposes. The tied LM head has no tensor of its
 * own (tie_word_embeddings: true).
 */
const LAYER_NAMES: Record<keyof LayerParams, string> = {
  attnNorm: 'input_layernorm.weight',
  wq: 'self_attn.q_proj.weight',
  wk: 'self_attn.k_proj.weight',
  wv: 'self_attn.v_proj.weight',
  wo: 'self_attn.o_proj.weight',
  mlpNorm: 'post_attention_layernorm.weight',
  wGate: 'mlp.gate_proj.weight',
  wUp: 'mlp.up_proj.weight',
  wDown: 'mlp.down_proj.weight',
};
const EMBED = 'model.embed_tokens.weight';
const FINAL_NORM = 'model.norm.weight';

/** Every parameter under its Hugging Face name (for pytrees shaped like the parameters: moments too). */
export function toHfNames<T>(params: { embed: { weight: T }; layers: readonly Record<keyof LayerParams, T>[]; finalNorm: T }): Map<string, T> {
  const out = new Map<string, T>([[EMBED, params.embed.weight]]);
  params.layers.forEach((layer, l) => {
    for (const key of Object.keys(LAYER_NAMES) as (keyof LayerParams)[]) out.set(`model.layers.${l}.${LAYER_NAMES[key]}`, layer[key]);
  });
  out.set(FINAL_NORM, params.finalNorm);
  return out;
}

/** The expected shape of every Hugging Face name for a config. */
export function expectedShapes(config: TransformerConfig): Map<string, number[]> {
  const c = config;
  const dh = headDim(c);
  const layer: Record<keyof LayerParams, number[]> = {
    attnNorm: [c.dModel],
    wq: [c.nHeads * dh, c.dModel],
    wk: [c.nKvHeads * dh, c.dModel],
    wv: [c.nKvHeads * dh, c.dModel],
    wo: [c.dModel, c.nHeads * dh],
    mlpNorm: [c.dModel],
    wGate: [c.dFf, c.dModel],
    wUp: [c.dFf, c.dModel],
    wDown: [c.dModel, c.dFf],
  };
  return toHfNames({ embed: { weight: [c.vocabSize, c.dModel] }, layers: Array.from({ length: c.nLayers }, () => layer), finalNorm: [c.dModel] });
}

export interface LoadOptions {
  readonly backend?: Backend;
  /** Convert every tensor to this dtype; default: as stored (F32 -> f32, F64 -> f64, BF16/F16 -> f32). */
  readonly dtype?: DType;
  /** Prefix of the names (`exp_avg.` for optimizer moments); default none. */
  readonly prefix?: string;
}

/**
 * Build the parameter pytree from named host tensors, checking that every expected tensor is there with its
 * shape and nothing else is (an untied lm_head or a bias this model lacks is an error, not silently dropped).
 */
export function fromHfNames(tensors: ReadonlyMap<string, HostTensor>, config: TransformerConfig, opts: LoadOptions = {}): E.Either<CheckpointError, TransformerParams> {
  const prefix = opts.prefix ?? '';
  const shapes = expectedShapes(config);
  for (const name of tensors.keys()) {
    if (name.startsWith(prefix) && !shapes.has(name.slice(prefix.length))) return E.left(new CheckpointError('unexpected-tensor', name, 'is not a parameter of this model (untied lm_head and biases are not supported)'));
  }
  const loaded = new Map<string, HostTensor>();
  for (const [name, shape] of shapes) {
    const t = tensors.get(prefix + name);
    if (!t) return E.left(new CheckpointError('missing-tensor', prefix + name, `expected shape [${shape.join(', ')}]`));
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      return E.left(new CheckpointError('wrong-shape', prefix + name, `has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`));
    }
    if (t.dtype === 'i32') return E.left(new CheckpointError('bad-dtype', prefix + name, 'a parameter must be a float tensor'));
    loaded.set(name, t);
  }
  const backend = opts.backend ?? getDefaultBackend();
  const up = (name: string): Tensor => {
    const t = loaded.get(name)!;
    const dtype = opts.dtype ?? t.dtype;
    return tensor(t.data, t.shape, { dtype, backend });
  };
  const layers: LayerParams[] = Array.from({ length: config.nLayers }, (_, l) => {
    const entries = (Object.keys(LAYER_NAMES) as (keyof LayerParams)[]).map((k) => [k, up(`model.layers.${l}.${LAYER_NAMES[k]}`)] as const);
    return Object.fromEntries(entries) as LayerParams;
  });
  return E.right({ embed: { weight: up(EMBED) }, layers, finalNorm: up(FINAL_NORM) });
}

/** The Hugging Face LlamaConfig fields for a config (what `config.json` holds). */
export function toHfConfig(c: TransformerConfig): Record<string, unknown> {
  return {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: c.vocabSize,
    hidden_size: c.dModel,
    intermediate_size: c.dFf,
    num_hidden_layers: c.nLayers,
    num_attention_heads: c.nHeads,
    num_key_value_heads: c.nKvHeads,
    max_position_embeddings: c.maxSeqLen,
    rope_theta: c.ropeTheta,
    rms_norm_eps: c.rmsEps,
    hidden_act: 'silu',
    tie_word_embeddings: true,
    attention_bias: false,
  };
}

/** Read a Hugging Face Llama-style config.json, validating each field. */
export function fromHfConfig(json: unknown): E.Either<CheckpointError, TransformerConfig> {
  if (typeof json !== 'object' || json === null) return E.left(new CheckpointError('bad-config', 'config.json', 'is not a JSON object'));
  const j = json as Record<string, unknown>;
  const num = (field: string, fallback?: number): number | CheckpointError => {
    const v = j[field] ?? fallback;
    return typeof v === 'number' && Number.isFinite(v) ? v : new CheckpointError('bad-config', field, `expected a number, got ${JSON.stringify(v)}`);
  };
  if (j.tie_word_embeddings === false) return E.left(new CheckpointError('bad-config', 'tie_word_embeddings', 'an untied LM head is not supported'));
  const fields = {
    vocabSize: num('vocab_size'),
    dModel: num('hidden_size'),
    nLayers: num('num_hidden_layers'),
    nHeads: num('num_attention_heads'),
    nKvHeads: num('num_key_value_heads', typeof j.num_attention_heads === 'number' ? j.num_attention_heads : undefined),
    dFf: num('intermediate_size'),
    maxSeqLen: num('max_position_embeddings'),
    ropeTheta: num('rope_theta', 10_000),
    rmsEps: num('rms_norm_eps', 1e-6),
  };
  for (const v of Object.values(fields)) if (v instanceof CheckpointError) return E.left(v);
  const config = fields as unknown as TransformerConfig;
  try {
    return E.right(validateConfig(config));
  } catch (e) {
    return E.left(new CheckpointError('bad-config', 'config.json', (e as Error).message));
  }
}
