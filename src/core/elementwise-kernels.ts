import type { BinaryOp, UnaryOp } from './backend.js';

/**
 * The scalar definition of every elementwise kernel, in one place for both backends: a JS function (the CPU
 * kernel and the reference) and a WGSL expression over `x` (unary) or `a`, `b` (binary) that the WebGPU backend
 * splices into its one generic broadcasting kernel. Their vector-Jacobian rules live in `elementwise.ts`.
 * GELU is the tanh approximation (as in GPT-2 and JAX's default), since WGSL has no erf.
 */
export interface UnaryKernel {
  readonly cpu: (x: number) => number;
  readonly wgsl: string;
}
export interface BinaryKernel {
  readonly cpu: (a: number, b: number) => number;
  readonly wgsl: string;
}

const GELU_C = Math.sqrt(2 / Math.PI);
const sigmoid = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));
const geluInner = (x: number): number => GELU_C * (x + 0.044715 * x * x * x);

export const UNARY_KERNELS: Record<UnaryOp, UnaryKernel> = {
  neg: { cpu: (x) => -x, wgsl: '-x' },
  exp: { cpu: Math.exp, wgsl: 'exp(x)' },
  log: { cpu: Math.log, wgsl: 'log(x)' },
  sqrt: { cpu: Math.sqrt, wgsl: 'sqrt(x)' },
  rsqrt: { cpu: (x) => 1 / Math.sqrt(x), wgsl: 'inverseSqrt(x)' },
  tanh: { cpu: Math.tanh, wgsl: 'safe_tanh(x)' },
  sigmoid: { cpu: sigmoid, wgsl: 'safe_sigmoid(x)' },
  gelu: { cpu: (x) => 0.5 * x * (1 + Math.tanh(geluInner(x))), wgsl: 'gelu(x)' },
  silu: { cpu: (x) => x * sigmoid(x), wgsl: 'x * safe_sigmoid(x)' },
  abs: { cpu: Math.abs, wgsl: 'abs(x)' },
  square: { cpu: (x) => x * x, wgsl: 'x * x' },
  sign: { cpu: (x) => (x > 0 ? 1 : x < 0 ? -1 : 0), wgsl: 'sign(x)' },
  reciprocal: { cpu: (x) => 1 / x, wgsl: '1.0 / x' },
  relu: { cpu: (x) => (x > 0 ? x : 0), wgsl: 'max(x, 0.0)' },
  step: { cpu: (x) => (x > 0 ? 1 : 0), wgsl: 'select(0.0, 1.0, x > 0.0)' },
  geluGrad: {
    cpu: (x) => {
      const t = Math.tanh(geluInner(x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * x * x);
    },
    wgsl: 'gelu_grad(x)',
  },
  siluGrad: {
    cpu: (x) => {
      const s = sigmoid(x);
      return s * (1 + x * (1 - s));
    },
    wgsl: 'silu_grad(x)',
  },
};

const bool = (c: boolean): number => (c ? 1 : 0);

export const BINARY_KERNELS: Record<BinaryOp, BinaryKernel> = {
  add: { cpu: (a, b) => a + b, wgsl: 'a + b' },
  sub: { cpu: (a, b) => a - b, wgsl: 'a - b' },
  mul: { cpu: (a, b) => a * b, wgsl: 'a * b' },
  div: { cpu: (a, b) => a / b, wgsl: 'a / b' },
  pow: { cpu: Math.pow, wgsl: 'safe_pow(a, b)' },
  maximum: { cpu: (a, b) => (a >= b ? a : b), wgsl: 'max(a, b)' },
  minimum: { cpu: (a, b) => (a <= b ? a : b), wgsl: 'min(a, b)' },
  eq: { cpu: (a, b) => bool(a === b), wgsl: 'select(0.0, 1.0, a == b)' },
  ne: { cpu: (a, b) => bool(a !== b), wgsl: 'select(0.0, 1.0, a != b)' },
  lt: { cpu: (a, b) => bool(a < b), wgsl: 'select(0.0, 1.0, a < b)' },
  le: { cpu: (a, b) => bool(a <= b), wgsl: 'select(0.0, 1.0, a <= b)' },
  gt: { cpu: (a, b) => bool(a > b), wgsl: 'select(0.0, 1.0, a > b)' },
  ge: { cpu: (a, b) => bool(a >= b), wgsl: 'select(0.0, 1.0, a >= b)' },
};
