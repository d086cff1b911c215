import type { Tensor } from '../core/tensor.js';
import type { LoraModule } from './parameters.js';

/**
 * LoRA adapters as the policy holds them (the types only; `lora.ts` makes and merges them, `io/adapter-files.ts`
 * saves and loads them). A target module is named as Hugging Face and peft name it, and adapts the weight its row of
 * `LAYER_PARAMETERS` says (`MODULE_WEIGHT`); each adapted module adds scaling * B (A x) to its output (peft's
 * `LoraLayer`: A [r, in], B [out, r], Hu et al. 2021, Eq. 3), with A x on the dropped-out input.
 *
 * One adapted linear: A [r, in] and B [out, r], stored as peft stores `lora_A.weight` and `lora_B.weight`.
 */
export type LoraPair = { readonly a: Tensor; readonly b: Tensor };

/** A layer's adapters, by module (only the targeted ones). */
export type LoraLayer = { readonly [K in LoraModule]?: LoraPair };

/**
 * The adapters of a policy. `scaling` and `dropout` are plain numbers (pytree leaves that are carried, not
 * differentiated); the trainable tensors are `layers`.
 */
export type LoraWeights = {
  /** lora_alpha / r, or lora_alpha / sqrt(r) with rsLoRA (Kalajdzievski 2023). */
  readonly scaling: number;
  /** Probability of zeroing an input entry of the A path while training (peft's lora_dropout). */
  readonly dropout: number;
  readonly layers: readonly LoraLayer[];
};
