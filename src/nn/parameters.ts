import { headDim, type TransformerConfig } from './config.js';
import type { LayerParams } from './transformer.js';

/** A pytree shaped like the parameters, with leaves of any type (tensors, moments, shapes). */
export interface ParamsLike<T> {
  readonly embed: { readonly weight: T };
  readonly layers: readonly { readonly [K in keyof LayerParams]?: T }[];
  readonly finalNorm: T;
  readonly lmHead?: { readonly weight: T };
}

/** The shape of every parameter of a config, as a pytree (the optional tensors only where the config has them). */
export function paramShapes(config: TransformerConfig): ParamsLike<number[]> {
  const c = config;
  const dh = headDim(c);
  const layer: { [K in keyof LayerParams]?: number[] } = {
    attnNorm: [c.dModel],
    wq: [c.nHeads * dh, c.dModel],
    wk: [c.nKvHeads * dh, c.dModel],
    wv: [c.nKvHeads * dh, c.dModel],
    wo: [c.dModel, c.nHeads * dh],
    mlpNorm: [c.dModel],
    wGate: [c.dFf, c.dModel],
    wUp: [c.dFf, c.dModel],
    wDown: [c.dModel, c.dFf],
    ...(c.qkvBias ? { bq: [c.nHeads * dh], bk: [c.nKvHeads * dh], bv: [c.nKvHeads * dh] } : {}),
    ...(c.qkNorm ? { qNorm: [dh], kNorm: [dh] } : {}),
  };
  return {
    embed: { weight: [c.vocabSize, c.dModel] },
    layers: Array.from({ length: c.nLayers }, () => layer),
    finalNorm: [c.dModel],
    ...(c.tieEmbeddings === false ? { lmHead: { weight: [c.vocabSize, c.dModel] } } : {}),
  };
}
