import * as T from '../../src/index.js';

/**
 * A transformer's parameters with every matrix (embedding, linear weights, an untied head) frozen in a half dtype,
 * the norms and biases left f32, and the same parameters with those matrices rounded to the half dtype but held as
 * f32: the two should compute the same thing, the first widening inside the kernels. `params` live on a synchronous
 * backend; the pair is made on `backend` (any).
 */
export function frozenPair(
  params: T.TransformerParams,
  dtype: T.HalfDType,
  backend: T.Backend,
): { half: T.TransformerParams; wide: T.TransformerParams } {
  const moved = mapParams(params, (t) =>
    t.rank === 2 || t.backend === backend ? t : T.tensor(t.dataSync(), t.shape, { backend }),
  );
  const half = (t: T.Tensor): T.Tensor =>
    t.rank === 2 ? T.fromHalfBits(T.roundToHalf(dtype, t.dataSync()), t.shape, dtype, { backend }) : t;
  const wide = (t: T.Tensor): T.Tensor =>
    t.rank === 2 ? T.tensor(T.widenHalf(dtype, T.roundToHalf(dtype, t.dataSync())), t.shape, { backend }) : t;
  return { half: mapParams(moved, half), wide: mapParams(moved, wide) };
}

/** The parameters with every leaf mapped (a plain pytree map, keeping the optional leaves' absence). */
export function mapParams(p: T.TransformerParams, f: (t: T.Tensor) => T.Tensor): T.TransformerParams {
  return {
    embed: { weight: f(p.embed.weight) },
    layers: p.layers.map(
      (l) => Object.fromEntries(Object.entries(l).map(([k, t]) => [k, f(t as T.Tensor)])) as unknown as T.LayerParams,
    ),
    finalNorm: f(p.finalNorm),
    ...(p.lmHead ? { lmHead: { weight: f(p.lmHead.weight) } } : {}),
  };
}
