import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';

/**
 * Library entry points that returned wrong values instead of failing, and every op through `runOp` (so its
 * checks apply to all of them). Each case failed on the code before these checks.
 */
const disposedTensor = (): T.Tensor => {
  const t = T.tensor([1, 2, 3, 4, 5, 6], [2, 3]);
  t.dispose();
  return t;
};

describe('disposed tensors are rejected by every op and transformation', () => {
  const live = (): T.Tensor => T.tensor([1, 2, 3, 4, 5, 6], [2, 3]);
  const cases: Record<string, (x: T.Tensor) => unknown> = {
    // the identity paths (nothing to compute) used to hand the dead tensor back
    'reshape to its own shape': (x) => T.reshape(x, [2, 3]),
    'cast to its own dtype': (x) => T.cast(x, 'f32'),
    'sum over no axes': (x) => T.sum(x, []),
    'identity permute': (x) => T.permute(x, [0, 1]),
    'expand to its own shape': (x) => T.expand(x, [2, 3]),
    'full slice': (x) => T.slice(x, [0, 0]),
    'concat of one': (x) => T.concat([x], 0),
    zerosLike: (x) => T.zerosLike(x),
    reshape: (x) => T.reshape(x, [3, 2]),
    exp: (x) => T.exp(x),
    'add (second operand)': (x) => T.add(live(), x),
    matmul: (x) => T.matmul(x, live(), { transB: true }),
    rmsNorm: (x) => T.rmsNorm(x, T.ones([3])),
    adamwUpdate: (x) =>
      T.adamwUpdate(x, live(), live(), live(), { lr: 1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0, step: 1 }),
    stopGradient: (x) => T.stopGradient({ w: x }),
    'valueAndGrad over it': (x) => T.valueAndGrad((p: { w: T.Tensor }) => T.sum(p.w))({ w: x }),
    'grad over it': (x) => T.grad((p: T.Tensor) => T.sum(p))(x),
    vjp: (x) => T.vjp((p: T.Tensor) => T.exp(p), x),
  };
  for (const [name, f] of Object.entries(cases)) {
    it(name, () => {
      expect(() => f(disposedTensor())).toThrow(T.DisposedTensorError);
    });
  }

  it('stopGradient of a disposed tensor used to give a live handle over freed storage', () => {
    const x = disposedTensor();
    let caught: unknown = null;
    try {
      const y = T.stopGradient(x);
      y.dataSync();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(T.DisposedTensorError);
    expect((caught as T.DisposedTensorError).op).toBe('stopGradient');
  });
});

describe('dtype promotion follows JAX/NumPy', () => {
  const ints = (): T.Tensor => T.tensor(new Int32Array([1, 2, 3]));

  it('i32 times a non-integer number is f32 (it gave zeros)', () => {
    const y = T.mul(ints(), 0.5);
    expect(y.dtype).toBe('f32');
    expect([...y.dataSync()]).toEqual([0.5, 1, 1.5]);
  });

  it('i32 with an integer number stays i32', () => {
    const y = T.add(ints(), 2);
    expect(y.dtype).toBe('i32');
    expect([...y.dataSync()]).toEqual([3, 4, 5]);
  });

  it('log, exp, sqrt and division of i32 are f32 (log gave integers)', () => {
    const l = T.log(ints());
    expect(l.dtype).toBe('f32');
    expect([...l.dataSync()]).toEqual([1, 2, 3].map((v) => Math.fround(Math.log(v))));
    expect(T.sqrt(ints()).dataSync()[1]).toBeCloseTo(Math.SQRT2, 6);
    const q = T.div(ints(), T.tensor(new Int32Array([2, 2, 2])));
    expect(q.dtype).toBe('f32');
    expect([...q.dataSync()]).toEqual([0.5, 1, 1.5]);
    expect(T.softmax(ints()).dtype).toBe('f32');
    expect(T.mean(ints()).itemSync()).toBe(2);
  });

  it('where with an i32 branch and a fractional number is f32', () => {
    const y = T.where(T.tensor(new Int32Array([1, 0, 1])), ints(), 0.25);
    expect([...y.dataSync()]).toEqual([1, 0.25, 3]);
  });

  it('norms refuse integer inputs with a typed error', () => {
    expect(() => T.rmsNorm(ints(), T.ones([3]))).toThrow(T.DTypeError);
  });
});

describe('index ops are range-checked on the CPU backend', () => {
  it('crossEntropy with a target past the class count throws (it gave a finite loss)', () => {
    const logits = T.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3]);
    expect(() => T.crossEntropy(logits, T.tensor(new Int32Array([1, 3])))).toThrow(T.IndexRangeError);
    expect(() => T.crossEntropy(logits, T.tensor(new Int32Array([-1, 0])))).toThrow(T.IndexRangeError);
    expect(T.crossEntropy(logits, T.tensor(new Int32Array([2, 0]))).itemSync()).toBeGreaterThan(0);
  });

  it('gather, scatterAdd, takeAlongAxis and putAlongAxisAdd name the op, the index and the size', () => {
    const x = T.tensor([1, 2, 3, 4], [4]);
    const bad = T.tensor(new Int32Array([0, 4]));
    expect(() => T.gather(x, bad)).toThrow(/gather: index 4 at flat position 1 is out of range for an axis of size 4/);
    expect(() => T.scatterAdd(T.tensor([1, 1]), bad, 0, [4])).toThrow(T.IndexRangeError);
    expect(() => T.takeAlongAxis(T.reshape(x, [1, 4]), T.reshape(bad, [1, 2]), 1)).toThrow(T.IndexRangeError);
    expect(() => T.putAlongAxisAdd(T.tensor([1, 1], [1, 2]), T.reshape(bad, [1, 2]), 1, [1, 4])).toThrow(
      T.IndexRangeError,
    );
  });
});

describe('one door: the ops that bypassed runOp get its checks', () => {
  it('an optimizer step inside a differentiated function refuses (its gradient was silently zero)', () => {
    const hyper = { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0, step: 1 };
    const f = (p: T.Tensor): T.Tensor =>
      T.sum(T.adamwUpdate(p, T.onesLike(p), T.zerosLike(p), T.zerosLike(p), hyper).param);
    expect(() => T.grad(f)(T.tensor([1, 2]))).toThrow(T.NotDifferentiableError);
  });

  it('setDebugNans sees the outputs of the fused AdamW kernel', () => {
    const hyper = { lr: 1e308, beta1: 0.9, beta2: 0.99, eps: 0, weightDecay: 1e308, step: 1 };
    const p = T.tensor([1e30, 2]);
    T.setDebugNans(true);
    try {
      expect(() => T.adamwUpdate(p, T.tensor([1, 1]), T.zeros([2]), T.zeros([2]), hyper)).toThrow(/adamwUpdate output/);
    } finally {
      T.setDebugNans(false);
    }
  });

  it('a second derivative through a fused norm backward still refuses, now through runOpMulti', () => {
    const w = T.ones([3]);
    const f = (x: T.Tensor): T.Tensor => T.sum(T.square(T.grad((y: T.Tensor) => T.sum(T.rmsNorm(y, w)))(x)));
    expect(() => T.grad(f)(T.tensor([[1, 2, 3]]))).toThrow(T.SecondOrderError);
  });

  it('reshape is recorded through the view form: its gradient is the cotangent reshaped back', () => {
    const g = T.grad((x: T.Tensor) => T.sum(T.mul(T.reshape(x, [3, 2]), T.tensor([1, 2, 3, 4, 5, 6], [3, 2]))))(
      T.zeros([2, 3]),
    );
    expect(g.shape).toEqual([2, 3]);
    expect([...g.dataSync()]).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe('tidy', () => {
  it('a function returning a Promise is refused and what it made is freed (it leaked)', async () => {
    const before = T.liveTensors();
    const promise = Promise.resolve(0);
    expect(() =>
      T.tidy(() => {
        T.ones([4]);
        T.zeros([2]);
        return promise as unknown as T.Tensor;
      }),
    ).toThrow(T.ArgumentError);
    expect(T.liveTensors()).toBe(before);
    await promise;
  });
});
