import * as E from 'fp-ts/lib/Either.js';
import { CheckpointError } from './safetensors.js';
import { type MODEL_LIMITS, sizeOverLimit } from './limits.js';
import { headDim, validateConfig, type TransformerConfig } from '../nn/transformer.js';

/**
 * `config.json` as Hugging Face writes it for the three architectures this transformer implements, read and
 * written. Every field that changes the computation is either mapped or refused with a `CheckpointError`
 * naming the file and the field: a config this model would only approximate (RoPE scaling, sliding windows,
 * an o_proj bias, another activation) never loads.
 */
export const ARCHITECTURES = {
  LlamaForCausalLM: 'llama',
  Qwen2ForCausalLM: 'qwen2',
  Qwen3ForCausalLM: 'qwen3',
} as const;
export type Architecture = keyof typeof ARCHITECTURES;

const isArchitecture = (x: unknown): x is Architecture => typeof x === 'string' && Object.hasOwn(ARCHITECTURES, x);

/** The architecture a config runs as: Qwen3 has q/k norms, Qwen2 q/k/v biases, Llama neither. */
export function architectureOf(c: TransformerConfig): Architecture {
  if (c.qkNorm) return 'Qwen3ForCausalLM';
  return c.qkvBias ? 'Qwen2ForCausalLM' : 'LlamaForCausalLM';
}

/** The config.json fields for a config; `extra` (token ids, dtype) is merged first, so it cannot override these. */
export function toHfConfig(
  c: TransformerConfig,
  extra: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const architecture = architectureOf(c);
  return {
    ...extra,
    architectures: [architecture],
    model_type: ARCHITECTURES[architecture],
    vocab_size: c.vocabSize,
    hidden_size: c.dModel,
    intermediate_size: c.dFf,
    num_hidden_layers: c.nLayers,
    num_attention_heads: c.nHeads,
    num_key_value_heads: c.nKvHeads,
    head_dim: headDim(c),
    max_position_embeddings: c.maxSeqLen,
    // Both spellings: transformers < 5 reads rope_theta, transformers 5 rope_parameters.
    rope_theta: c.ropeTheta,
    rope_parameters: { rope_theta: c.ropeTheta, rope_type: 'default' },
    rms_norm_eps: c.rmsEps,
    hidden_act: 'silu',
    tie_word_embeddings: c.tieEmbeddings !== false,
    ...(c.padTokenId === undefined ? {} : { pad_token_id: c.padTokenId }),
    ...(architecture === 'Qwen2ForCausalLM' ? {} : { attention_bias: false }),
    ...(architecture === 'LlamaForCausalLM'
      ? { mlp_bias: false }
      : { use_sliding_window: false, sliding_window: null }),
  };
}

type Fields = Readonly<Record<string, unknown>>;

/** config.json's name for each size of the model. */
const HF_FIELD: Readonly<Record<keyof typeof MODEL_LIMITS, string>> = {
  vocabSize: 'vocab_size',
  dModel: 'hidden_size',
  nLayers: 'num_hidden_layers',
  nHeads: 'num_attention_heads',
  nKvHeads: 'num_key_value_heads',
  headDim: 'head_dim',
  dFf: 'intermediate_size',
  maxSeqLen: 'max_position_embeddings',
};

/** Read a Hugging Face config.json (`file` names it in errors), validating each field. */
export function fromHfConfig(json: unknown, file = 'config.json'): E.Either<CheckpointError, TransformerConfig> {
  const bad = (field: string, detail: string): E.Either<CheckpointError, never> =>
    E.left(new CheckpointError('bad-config', field, detail, file));
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return bad('config.json', 'is not a JSON object');
  const j = json as Fields;
  const arch = architectureField(j);
  if (arch === null) {
    return bad(
      'architectures',
      `${JSON.stringify(j.architectures ?? j.model_type)} is not supported ` +
        `(supported: ${Object.keys(ARCHITECTURES).join(', ')})`,
    );
  }
  const unsupported = unsupportedField(j, arch);
  if (unsupported) return bad(unsupported[0], unsupported[1]);
  const rope = ropeTheta(j);
  if (typeof rope === 'string') return bad(rope.split(':')[0]!, rope.slice(rope.indexOf(':') + 1).trim());
  const num = (field: string, fallback?: number): number | CheckpointError => {
    const v = j[field] ?? fallback;
    return typeof v === 'number' && Number.isFinite(v)
      ? v
      : new CheckpointError('bad-config', field, `expected a number, got ${JSON.stringify(v)}`, file);
  };
  const heads = num('num_attention_heads');
  const fields = {
    vocabSize: num('vocab_size'),
    dModel: num('hidden_size'),
    nLayers: num('num_hidden_layers'),
    nHeads: heads,
    nKvHeads: num('num_key_value_heads', typeof heads === 'number' ? heads : undefined),
    dFf: num('intermediate_size'),
    maxSeqLen: num('max_position_embeddings'),
    rmsEps: num('rms_norm_eps', 1e-6),
    ...(j.head_dim === undefined || j.head_dim === null ? {} : { headDim: num('head_dim') }),
    ...(j.pad_token_id === undefined || j.pad_token_id === null ? {} : { padTokenId: num('pad_token_id') }),
  };
  for (const v of Object.values(fields)) if (v instanceof CheckpointError) return E.left(v);
  // The same limits as flags, before anything is sized by a value (RoPE tables by max_position_embeddings, ...).
  const over = sizeOverLimit(fields as Record<string, number>);
  if (over) return bad(HF_FIELD[over[0]], `is ${over[1]}, above the limit of ${over[2]}`);
  if (j.tie_word_embeddings !== undefined && typeof j.tie_word_embeddings !== 'boolean')
    return bad('tie_word_embeddings', 'is not a boolean');
  const config: TransformerConfig = {
    ...(fields as unknown as Omit<TransformerConfig, 'ropeTheta'>),
    ropeTheta: rope,
    ...(arch === 'Qwen2ForCausalLM' ? { qkvBias: true } : {}),
    ...(arch === 'Qwen3ForCausalLM' ? { qkNorm: true } : {}),
    // transformers' default for all three classes is an untied head.
    ...(j.tie_word_embeddings === true ? {} : { tieEmbeddings: false }),
  };
  try {
    return E.right(validateConfig(withoutDefaults(config)));
  } catch (e) {
    return bad('config.json', (e as Error).message);
  }
}

/** Optional fields equal to their defaults are left out, so a plain config reads back equal to itself. */
function withoutDefaults(c: TransformerConfig): TransformerConfig {
  if (c.headDim === undefined || c.headDim * c.nHeads !== c.dModel) return c;
  const { headDim: _, ...rest } = c;
  return rest;
}

function architectureField(j: Fields): Architecture | null {
  if (Array.isArray(j.architectures))
    return j.architectures.length === 1 && isArchitecture(j.architectures[0]) ? j.architectures[0] : null;
  if (j.architectures !== undefined) return null;
  const byType = Object.entries(ARCHITECTURES).find(([, t]) => t === j.model_type);
  return byType ? (byType[0] as Architecture) : null;
}

/** The first field that asks for something this model does not compute, with why. */
function unsupportedField(j: Fields, arch: Architecture): [string, string] | null {
  if (j.hidden_act !== undefined && j.hidden_act !== 'silu')
    return ['hidden_act', `${JSON.stringify(j.hidden_act)} is not supported (only silu)`];
  if (arch !== 'Qwen2ForCausalLM' && j.attention_bias === true)
    return ['attention_bias', 'attention biases (with an o_proj bias) are not supported'];
  if (j.mlp_bias === true) return ['mlp_bias', 'MLP biases are not supported'];
  if (j.use_sliding_window === true) return ['use_sliding_window', 'sliding-window attention is not supported'];
  if (Array.isArray(j.layer_types) && j.layer_types.some((t) => t !== 'full_attention'))
    return ['layer_types', 'only full_attention layers are supported'];
  return null;
}

/** rope_theta from `rope_parameters` (transformers 5) or the top level (older); "field: reason" if unsupported. */
function ropeTheta(j: Fields): number | string {
  const scaling = j.rope_scaling;
  if (scaling !== undefined && scaling !== null) {
    const type = (scaling as Fields).rope_type ?? (scaling as Fields).type;
    if (type !== 'default') return `rope_scaling: RoPE scaling type ${JSON.stringify(type)} is not implemented`;
  }
  const params = j.rope_parameters;
  if (params !== undefined && params !== null) {
    if (typeof params !== 'object' || Array.isArray(params)) return 'rope_parameters: is not an object';
    const p = params as Fields;
    if (p.rope_type !== undefined && p.rope_type !== 'default')
      return `rope_parameters.rope_type: RoPE type ${JSON.stringify(p.rope_type)} is not implemented`;
    if (p.rope_theta !== undefined)
      return typeof p.rope_theta === 'number' && p.rope_theta > 0
        ? p.rope_theta
        : `rope_parameters.rope_theta: expected a positive number`;
  }
  const top = j.rope_theta;
  if (top === undefined) return 10_000;
  return typeof top === 'number' && top > 0
    ? top
    : `rope_theta: expected a positive number, got ${JSON.stringify(top)}`;
}
