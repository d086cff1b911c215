import * as E from 'fp-ts/lib/Either.js';
import type { Backend } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import type { Rng } from '../core/rng.js';
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { stopGradient } from '../core/transforms.js';
import type { PyTree } from '../core/pytree.js';
import { uniform, zeros } from '../ops/creation.js';
import { add, cast, mul } from '../ops/elementwise.js';
import { matmul } from '../ops/matmul.js';
import type { LoraLayer, LoraPair, LoraWeights } from './adapters.js';
import { layerParameter, LORA_MODULES, MODULE_WEIGHT, type LoraModule } from './parameters.js';
import type { LayerParams, TransformerConfig, TransformerParams } from './transformer.js';

export { LORA_MODULES, MODULE_WEIGHT, type LoraLayer, type LoraModule, type LoraPair, type LoraWeights };

/**
 * LoRA (Hu et al. 2021) on the policy, in peft's manner: a targeted linear W [out, in] computes
 * W x + scaling * B A dropout(x) with A [r, in] and B [out, r] trainable and W frozen; scaling = alpha / r, or
 * alpha / sqrt(r) with rsLoRA (Kalajdzievski 2023, Eq. 1). A starts uniform in +-1/sqrt(in) (peft's
 * kaiming_uniform with a = sqrt(5)) and B at zero, so step 0 computes the base model exactly. The trainer
 * differentiates `trainableOf(params)` only: the base gets no gradients and no optimizer state, and the KL reference
 * is `withoutLora(params)`, the same base weights with the adapters switched off (what TRL does with peft).
 * Saved in peft's layout by `io/adapter-files.ts`.
 */
export interface LoraConfig {
  readonly r: number;
  readonly alpha: number;
  readonly dropout: number;
  readonly targetModules: readonly LoraModule[];
  readonly useRslora: boolean;
}

/** peft's LoraConfig defaults (r 8, lora_alpha 8, no dropout; q_proj and v_proj for Llama/Qwen models). */
export const LORA_DEFAULTS: LoraConfig = {
  r: 8,
  alpha: 8,
  dropout: 0,
  targetModules: ['q_proj', 'v_proj'],
  useRslora: false,
};

/**
 * Target modules as peft takes them: `all-linear` (every linear layer but the LM head), or module names, given as
 * a list or comma-separated. Left: why not.
 */
export function parseTargetModules(v: unknown): E.Either<string, LoraModule[]> {
  if (v === 'all-linear') return E.right([...LORA_MODULES]);
  const list = typeof v === 'string' ? v.split(',').map((s) => s.trim()) : v;
  if (!Array.isArray(list) || list.length === 0)
    return E.left('must be "all-linear" or a non-empty list of module names');
  const out: LoraModule[] = [];
  for (const name of list) {
    if (!(LORA_MODULES as readonly unknown[]).includes(name))
      return E.left(`names ${JSON.stringify(name)}, not one of all-linear, ${LORA_MODULES.join(', ')}`);
    if (!out.includes(name as LoraModule)) out.push(name as LoraModule);
  }
  // In a fixed order, so the same set always gives the same adapters, draws and files.
  return E.right(LORA_MODULES.filter((m) => out.includes(m)));
}

/** Why a LoRA config is unusable, or null. */
export function loraConfigProblem(c: LoraConfig): { field: keyof LoraConfig; why: string } | null {
  if (!(Number.isInteger(c.r) && c.r >= 1)) return { field: 'r', why: 'must be a positive integer' };
  if (!(Number.isFinite(c.alpha) && c.alpha > 0)) return { field: 'alpha', why: 'must be > 0' };
  if (!(c.dropout >= 0 && c.dropout < 1)) return { field: 'dropout', why: 'must be in [0, 1)' };
  if (c.targetModules.length === 0) return { field: 'targetModules', why: 'must name at least one module' };
  return null;
}

export const loraScaling = (c: LoraConfig): number => (c.useRslora ? c.alpha / Math.sqrt(c.r) : c.alpha / c.r);

/** [out, in] of a module's base weight (what its A and B adapt; the memory estimate counts them too). */
export function moduleShape(config: TransformerConfig, module: LoraModule): [number, number] {
  const s = layerParameter(MODULE_WEIGHT[module]).shape(config);
  return [s[0]!, s[1]!];
}

/** Fresh adapters: A uniform in +-1/sqrt(in), B zero, drawn layer by layer, module by module in LORA_MODULES order. */
export function initLora(
  config: TransformerConfig,
  lora: LoraConfig,
  rng: Rng,
  opts: { readonly backend: Backend; readonly dtype?: DType },
): LoraWeights {
  const on = { dtype: opts.dtype ?? 'f32', backend: opts.backend };
  const layers: LoraLayer[] = [];
  for (let l = 0; l < config.nLayers; l++) {
    const layer: Partial<Record<LoraModule, LoraPair>> = {};
    for (const m of lora.targetModules) {
      const [out, inp] = moduleShape(config, m);
      const bound = 1 / Math.sqrt(inp);
      layer[m] = { a: uniform([lora.r, inp], rng, -bound, bound, on), b: zeros([out, lora.r], on) };
    }
    layers.push(layer);
  }
  return { scaling: loraScaling(lora), dropout: lora.dropout, layers };
}

/** The policy with adapters attached (the base tensors are shared, not copied). */
export const withLora = (params: TransformerParams, lora: LoraWeights): TransformerParams => ({ ...params, lora });

/** The base model: the same weights with the adapters switched off (peft's `disable_adapter()`). */
export function withoutLora(params: TransformerParams): TransformerParams {
  const { lora: _, ...base } = params;
  return base;
}

/** What an optimizer updates: the adapters' tensors when the policy has them, else every parameter. */
export function trainableOf(params: TransformerParams): PyTree {
  return params.lora ? (params.lora.layers as PyTree) : (params as unknown as PyTree);
}

/** `params` with its trainable part replaced by `t` (a tree shaped as `trainableOf(params)`). */
export function withTrainable(params: TransformerParams, t: PyTree): TransformerParams {
  return params.lora
    ? { ...params, lora: { ...params.lora, layers: t as unknown as readonly LoraLayer[] } }
    : (t as unknown as TransformerParams);
}

/**
 * The base weights with every adapter merged in, W + scaling * B A (peft's `merge_and_unload`): new tensors for the
 * adapted weights, new handles over the same storage for the rest, so disposing the result frees only what it made.
 */
export function mergeLora(params: TransformerParams): TransformerParams {
  const lora = params.lora;
  const base = stopGradient(withoutLora(params));
  if (!lora) return base;
  return {
    ...base,
    layers: base.layers.map((layer, l) => {
      const adapters = lora.layers[l] ?? {};
      const merged: Record<string, Tensor> = { ...(layer as unknown as Record<string, Tensor>) };
      for (const m of LORA_MODULES) {
        const pair = adapters[m];
        if (!pair) continue;
        const key = MODULE_WEIGHT[m];
        const w = layer[key]!;
        // A frozen weight held in bf16/f16 is widened first: the merged one is trained, f32. One scope per weight,
        // so a model's merge holds one weight's temporaries at a time, not every weight's.
        merged[key] = tidy(() =>
          add(w.dtype === 'f32' ? w : cast(w, 'f32'), mul(matmul(pair.b, pair.a), lora.scaling)),
        );
        w.dispose();
      }
      return merged as unknown as LayerParams;
    }),
  };
}
