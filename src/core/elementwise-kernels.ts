import type { BinaryOp, UnaryOp } from './kernels.js';

/**
 * The scalar definition of every elementwise kernel, in one place for every backend. An entry is keyed by the
 * language a backend runs, not by the backend: `js`, a function (what a backend running JavaScript calls: the
 * reference kernels, the numerical oracle, and so the cpu backend wherever it falls back to them), and `wgsl`,
 * an expression over `x` (unary) or `a`, `b` (binary) that a WGSL backend splices into its one generic
 * broadcasting kernel. A new backend in one of these languages adds nothing here. Their vector-Jacobian rules
 * live in `ops/elementwise.ts`.
 * GELU is the tanh approximation (as in GPT-2 and JAX's default), since WGSL has no erf.
 */
export interface UnaryKernel {
  readonly js: (x: number) => number;
  readonly wgsl: string;
}
export interface BinaryKernel {
  readonly js: (a: number, b: number) => number;
  readonly wgsl: string;
}

const GELU_C = Math.sqrt(2 / Math.PI);
const sigmoid = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));
const geluInner = (x: number): number => GELU_C * (x + 0.044715 * x * x * x);

export const UNARY_KERNELS: Record<UnaryOp, UnaryKernel> = {
  neg: { js: (x) => -x, wgsl: '-x' },
  exp: { js: Math.exp, wgsl: 'exp(x)' },
  log: { js: Math.log, wgsl: 'log(x)' },
  sqrt: { js: Math.sqrt, wgsl: 'sqrt(x)' },
  rsqrt: { js: (x) => 1 / Math.sqrt(x), wgsl: 'inverseSqrt(x)' },
  tanh: { js: Math.tanh, wgsl: 'safe_tanh(x)' },
  sigmoid: { js: sigmoid, wgsl: 'safe_sigmoid(x)' },
  gelu: { js: (x) => 0.5 * x * (1 + Math.tanh(geluInner(x))), wgsl: 'gelu(x)' },
  silu: { js: (x) => x * sigmoid(x), wgsl: 'x * safe_sigmoid(x)' },
  abs: { js: Math.abs, wgsl: 'abs(x)' },
  square: { js: (x) => x * x, wgsl: 'x * x' },
  sign: { js: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0), wgsl: 'sign(x)' },
  reciprocal: { js: (x) => 1 / x, wgsl: '1.0 / x' },
  relu: { js: (x) => (x > 0 ? x : 0), wgsl: 'max(x, 0.0)' },
  step: { js: (x) => (x > 0 ? 1 : 0), wgsl: 'select(0.0, 1.0, x > 0.0)' },
  geluGrad: {
    js: (x) => {
      const t = Math.tanh(geluInner(x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
    },
    wgsl: 'gelu_grad(x)',
  },
  siluGrad: {
    js: (x) => {
      const s = sigmoid(x);
      return s * (1 + x * (1 - s));
    },
    wgsl: 'silu_grad(x)',
  },
};

const bool = (c: boolean): number => (c ? 1 : 0);

export const BINARY_KERNELS: Record<BinaryOp, BinaryKernel> = {
  add: { js: (a, b) => a + b, wgsl: 'a + b' },
  sub: { js: (a, b) => a - b, wgsl: 'a - b' },
  mul: { js: (a, b) => a * b, wgsl: 'a * b' },
  div: { js: (a, b) => a / b, wgsl: 'a / b' },
  pow: { js: Math.pow, wgsl: 'safe_pow(a, b)' },
  maximum: { js: (a, b) => (a >= b ? a : b), wgsl: 'max(a, b)' },
  minimum: { js: (a, b) => (a <= b ? a : b), wgsl: 'min(a, b)' },
  eq: { js: (a, b) => bool(a === b), wgsl: 'select(0.0, 1.0, a == b)' },
  ne: { js: (a, b) => bool(a !== b), wgsl: 'select(0.0, 1.0, a != b)' },
  lt: { js: (a, b) => bool(a < b), wgsl: 'select(0.0, 1.0, a < b)' },
  le: { js: (a, b) => bool(a <= b), wgsl: 'select(0.0, 1.0, a <= b)' },
  gt: { js: (a, b) => bool(a > b), wgsl: 'select(0.0, 1.0, a > b)' },
  ge: { js: (a, b) => bool(a >= b), wgsl: 'select(0.0, 1.0, a >= b)' },
};
