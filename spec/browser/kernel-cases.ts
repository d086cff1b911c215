import * as T from '../../src/index.js';

/**
 * Kernels and their vector-Jacobian rules, run the same way in a page (WebGPU through navigator.gpu) and in Node
 * (the CPU backend): this module is bundled into the page and imported by the spec. Inputs are fixed (f32-exact
 * values on a grid, as spec/webgpu draws them) and the tolerances are spec/webgpu's for the same op, cited per case.
 * Sizes are tiny: SwiftShader is a CPU rasterizer.
 */
export interface Arg {
  readonly shape: readonly number[];
  readonly values: readonly number[];
  readonly dtype: 'f32' | 'i32';
}

export interface Tol {
  readonly atol: number;
  readonly rtol: number;
}

export interface KernelCase {
  readonly name: string;
  readonly args: readonly Arg[];
  /** The outputs compared in the forward check; the gradient check differentiates sum_i sum(outputs_i * w_i). */
  readonly f: (xs: T.Tensor[]) => T.Tensor[];
  /** null: the case is checked through its gradient only (as spec/webgpu checks it). */
  readonly forward: Tol | null;
  readonly grad: Tol;
}

export interface CaseResult {
  readonly forward: number[][];
  /** The value of the weighted sum, then the gradient of every argument. */
  readonly vjp: number[][];
}

const EXACT: Tol = { atol: 0, rtol: 0 };
/** spec/webgpu/grad.spec.ts: atol 2e-6 per output element, rtol 2e-5, scaled where sums or matmuls enter. */
const gradTol = (n: number, scale = 1): Tol => ({ atol: 2e-6 * Math.max(1, n) * scale, rtol: 2e-5 * scale });
const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A deterministic stream (an LCG) of grid points in [lo, hi]: f32-exact, so both backends get the same numbers. */
function grid(shape: readonly number[], lo: number, hi: number, seed: number): Arg {
  let s = seed * 7919 + 17;
  const values = Array.from({ length: size(shape) }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return Math.fround(lo + ((hi - lo) * (s % 4097)) / 4096);
  });
  return { shape, values, dtype: 'f32' };
}

function ints(shape: readonly number[], below: number, seed: number): Arg {
  let s = seed * 104729 + 3;
  const values = Array.from({ length: size(shape) }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % below;
  });
  return { shape, values, dtype: 'i32' };
}

const one =
  (f: (x: T.Tensor) => T.Tensor) =>
  (xs: T.Tensor[]): T.Tensor[] => [f(xs[0]!)];
const two =
  (f: (a: T.Tensor, b: T.Tensor) => T.Tensor) =>
  (xs: T.Tensor[]): T.Tensor[] => [f(xs[0]!, xs[1]!)];

export const CASES: readonly KernelCase[] = [
  // spec/webgpu/elementwise.spec.ts: exp rtol 2e-6 (3 + 2|x| ULP), log atol = rtol = 1e-6,
  // tanh (transcendental) 1e-6 / 3e-6.
  {
    name: 'exp',
    args: [grid([3, 5], -3, 3, 1)],
    f: one(T.exp),
    forward: { atol: 0, rtol: 2e-6 },
    grad: gradTol(15, 4),
  },
  {
    name: 'log',
    args: [grid([3, 5], 0.2, 3, 2)],
    f: one(T.log),
    forward: { atol: 1e-6, rtol: 1e-6 },
    grad: gradTol(15, 4),
  },
  {
    name: 'tanh',
    args: [grid([2, 3, 4], -3, 3, 3)],
    f: one(T.tanh),
    forward: { atol: 1e-6, rtol: 3e-6 },
    grad: gradTol(24, 4),
  },
  // Binary ops with broadcasting: mul is one correctly rounded multiply (exact), div 2.5 ULP.
  {
    name: 'mul (broadcast)',
    args: [grid([3, 1, 4], -2, 2, 4), grid([5, 4], -2, 2, 5)],
    f: two(T.mul),
    forward: EXACT,
    grad: gradTol(12 * 20, 4),
  },
  {
    name: 'div (broadcast)',
    args: [grid([4, 5], -2, 2, 6), grid([5], 0.5, 2, 7)],
    f: two(T.div),
    forward: { atol: 0, rtol: 4e-7 },
    grad: gradTol(20 * 5, 4),
  },
  // spec/webgpu/reduce.spec.ts: sums atol 2e-6 per reduced element, rtol 1e-6; max exact; logsumexp 2e-6 / 2e-6.
  {
    name: 'sum over an axis',
    args: [grid([3, 4, 5], -2, 2, 8)],
    f: one((x) => T.sum(x, [1])),
    forward: { atol: 2e-6 * 4, rtol: 1e-6 },
    grad: gradTol(60, 4),
  },
  {
    name: 'max over two axes',
    args: [grid([3, 4, 5], -2, 2, 9)],
    f: one((x) => T.max(x, [0, 2])),
    forward: EXACT,
    grad: gradTol(60, 4),
  },
  {
    name: 'logsumexp',
    args: [grid([4, 7], -2, 2, 10)],
    f: one((x) => T.logsumexp(x, [1])),
    forward: { atol: 2e-6, rtol: 2e-6 },
    grad: gradTol(28, 4),
  },
  // spec/webgpu/matmul.spec.ts: atol 1e-6 K, rtol 1e-6; grad.spec.ts: gradTol(m n 4, K).
  {
    name: 'matmul (broadcast batch, transposed B)',
    args: [grid([2, 5, 7], -2, 2, 11), grid([6, 7], -2, 2, 12)],
    f: two((a, b) => T.matmul(a, b, { transB: true })),
    forward: { atol: 1e-6 * 7, rtol: 1e-6 },
    grad: gradTol(2 * 5 * 6 * 4, 7),
  },
  // spec/webgpu/rows.spec.ts: softmax 1e-6 / 4e-6, norms 2e-6 / 4e-6; grad.spec.ts: gradTol(n, 4) and gradTol(n, 10).
  {
    name: 'softmax, logSoftmax',
    args: [grid([3, 6], -4, 4, 13)],
    f: (xs) => [T.softmax(xs[0]!, 1), T.logSoftmax(xs[0]!, 1)],
    forward: { atol: 1e-6, rtol: 4e-6 },
    grad: gradTol(18, 4),
  },
  {
    name: 'rmsNorm, layerNorm',
    args: [grid([3, 9], -3, 3, 14), grid([9], 0.5, 2, 15), grid([9], -1, 1, 16)],
    f: ([x, w, b]) => [T.rmsNorm(x!, w!, 1e-5), T.layerNorm(x!, w!, b!, 1e-5)],
    forward: { atol: 2e-6, rtol: 4e-6 },
    grad: gradTol(27, 10),
  },
  // Indexing and movement move or add values in the CPU's order: exact forward (spec/webgpu/movement.spec.ts).
  {
    name: 'gather, scatterAdd, takeAlongAxis, putAlongAxisAdd',
    args: [grid([5, 3], -2, 2, 17), ints([4], 5, 18), ints([5, 2], 3, 19), grid([4, 3], -2, 2, 20)],
    f: ([x, idx, idx2, u]) => {
      const t = T.takeAlongAxis(x!, idx2!, 1);
      return [T.gather(x!, idx!, 0), T.scatterAdd(u!, idx!, 0, x!.shape), t, T.putAlongAxisAdd(t, idx2!, 1, x!.shape)];
    },
    forward: EXACT,
    grad: gradTol(40),
  },
  {
    name: 'expand, permute, slice, pad, concat',
    args: [grid([3, 4], -2, 2, 21)],
    f: ([x]) => {
      const e = T.expand(T.expandDims(x!, 0), [2, 3, 4]);
      const p = T.permute(e, [2, 1, 0]);
      const s = T.slice(p, [0, 0, 0], [3, 2, 1]);
      const padded = T.pad(s, [1, 1, 1], [5, 4, 3]);
      return [T.concat([padded, padded], 0)];
    },
    forward: EXACT,
    grad: gradTol(12 * 4),
  },
  // Composites, checked through their gradient as in grad.spec.ts.
  {
    name: 'crossEntropy, tokenLogProbs',
    args: [grid([4, 11], -4, 4, 22), ints([4], 11, 23)],
    f: ([l, t]) => [T.crossEntropy(l!, t!, 'sum'), T.tokenLogProbs(l!, t!)],
    forward: null,
    grad: gradTol(44, 4),
  },
  {
    name: 'causalAttention',
    args: [grid([1, 2, 5, 4], -2, 2, 24), grid([1, 2, 5, 4], -2, 2, 25), grid([1, 2, 5, 4], -2, 2, 26)],
    f: ([q, k, v]) => [T.causalAttention(q!, k!, v!)],
    forward: null,
    grad: gradTol(40, 8),
  },
];

/** Deterministic, non-uniform cotangent weights (spec/webgpu/helpers.ts's). */
export const weights = (n: number, seed: number): number[] =>
  Array.from({ length: n }, (_, i) => Math.fround(Math.sin(1.37 * i + 0.71 + seed) + 0.25 * ((i % 3) - 1)));

const on = (backend: T.Backend, a: Arg): T.Tensor => T.tensor([...a.values], [...a.shape], { dtype: a.dtype, backend });
const read = (ts: readonly T.Tensor[]): Promise<number[][]> =>
  Promise.all(ts.map(async (t) => Array.from(await t.data())));

/** Run one case on a backend: its outputs, then the value and gradients of the weighted sum of its outputs. */
export async function runCase(c: KernelCase, backend: T.Backend): Promise<CaseResult> {
  const xs = c.args.map((a) => on(backend, a));
  const outputs = T.tidy(() => c.f(xs));
  const ws = outputs.map((o, i) => T.tensor(weights(size(o.shape), i), [...o.shape], { backend }));
  const [value, grads] = T.valueAndGrad((ps: T.Tensor[]) => {
    const terms = c.f(ps).map((o, i) => T.sum(T.mul(o, ws[i]!)));
    return terms.reduce((a, b) => T.add(a, b));
  })(xs);
  try {
    return { forward: await read(outputs), vjp: await read([value, ...grads]) };
  } finally {
    T.dispose([...xs, ...outputs, ...ws, value, ...grads]);
  }
}
