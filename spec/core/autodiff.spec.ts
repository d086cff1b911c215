import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { absorbed } from '../../src/core/tape.js';
import { kt, runOp } from '../../src/ops/op.js';

const f64 = (values: number[], shape: number[]): T.Tensor => T.tensor(values, shape, { dtype: 'f64' });
const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol = 1e-12): void => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(b[i]!)));
};
const finite = fc.double({ min: -2, max: 2, noNaN: true });

describe('reverse mode over a graph', () => {
  it('grad on a diamond equals the sum over its two paths (closed form)', () =>
    fc.assert(
      fc.property(
        fc.array(finite, { minLength: 1, maxLength: 6 }),
        fc.double({ min: -3, max: 3, noNaN: true }),
        (xs, k) => {
          // u = x^2 feeds two branches, exp(u) and k * tanh(u), which meet again in a sum.
          const f = (x: T.Tensor): T.Tensor => {
            const u = T.square(x);
            return T.sum(T.add(T.exp(u), T.mul(T.tanh(u), k)));
          };
          const g = T.grad(f)(f64(xs, [xs.length])).dataSync();
          const expected = xs.map((x) => (Math.exp(x * x) + k * (1 - Math.tanh(x * x) ** 2)) * 2 * x);
          close(g, expected, 1e-12);
        },
      ),
    ));

  it('a chain of 200 diamonds (2^200 paths) costs linear time and gives (a+b)^n', () => {
    const n = 200;
    const [a, b] = [0.6, 0.45];
    const f = (x: T.Tensor): T.Tensor => {
      let y = x;
      for (let i = 0; i < n; i++) y = T.add(T.mul(y, a), T.mul(y, b));
      return T.sum(y);
    };
    const g = T.grad(f)(f64([1, 2], [2])).dataSync();
    close(g, [(a + b) ** n, (a + b) ** n], 1e-10);
  });

  it('10,000 chained ops backpropagate without stack overflow, in well under a second', () => {
    const f = (x: T.Tensor): T.Tensor => {
      let y = x;
      for (let i = 0; i < 10_000; i++) y = T.mul(y, 1.0001);
      return T.sum(y);
    };
    const x = f64([1], [1]);
    const start = performance.now();
    const g = T.grad(f)(x).dataSync();
    const elapsed = performance.now() - start;
    close(g, [1.0001 ** 10_000], 1e-9);
    expect(elapsed).toBeLessThan(1000);
  });

  it('inputs a function does not use get zeros of their shape, over nested pytrees', () => {
    const params = {
      w: f64([1, 2, 3], [3]),
      nested: [{ b: f64([5], [1]) }, f64([1, 2, 3, 4], [2, 2])] as [{ b: T.Tensor }, T.Tensor],
      label: 'static',
    };
    const g = T.grad((p: typeof params) => T.sum(T.square(p.w)))(params);
    close(g.w.dataSync(), [2, 4, 6]);
    expect(g.nested[0]!.b.shape).toEqual([1]);
    close(g.nested[0]!.b.dataSync(), [0]);
    expect(g.nested[1]!.shape).toEqual([2, 2]);
    close(g.nested[1]!.dataSync(), [0, 0, 0, 0]);
    expect(g.label).toBe('static');
  });

  it('stopGradient blocks the path through it', () => {
    const g = T.grad((x: T.Tensor) => T.sum(T.mul(x, T.stopGradient(x))))(f64([3, -2], [2])).dataSync();
    close(g, [3, -2]); // d/dx [x * sg(x)] = sg(x)
  });

  it('grad of grad: d2/dx2 sum(x^3) = 6x, and the second derivative of a diamond', () =>
    fc.assert(
      fc.property(fc.array(finite, { minLength: 1, maxLength: 4 }), (xs) => {
        const first = T.grad((x: T.Tensor) => T.sum(T.mul(T.square(x), x)));
        const second = T.grad((x: T.Tensor) => T.sum(first(x)))(f64(xs, [xs.length])).dataSync();
        close(
          second,
          xs.map((x) => 6 * x),
          1e-12,
        );
      }),
      { numRuns: 20 },
    ));

  it('valueAndGrad with aux returns the aux untouched', () => {
    const [[loss, aux], g] = T.valueAndGrad(
      (p: { w: T.Tensor }) => {
        const y = T.square(p.w);
        return [T.sum(y), { y, note: 'metrics' }] as [T.Tensor, { y: T.Tensor; note: string }];
      },
      { hasAux: true },
    )({ w: f64([1, 2], [2]) });
    expect(loss.itemSync()).toBe(5);
    close(aux.y.dataSync(), [1, 4]);
    expect(aux.note).toBe('metrics');
    close(g.w.dataSync(), [2, 4]);
  });

  it('vjp pulls back a pytree of cotangents, repeatedly, and refuses after dispose', () =>
    fc.assert(
      fc.property(
        fc.array(finite, { minLength: 2, maxLength: 5 }),
        fc.array(finite, { minLength: 2, maxLength: 5 }),
        (xs, cs) => {
          const n = Math.min(xs.length, cs.length);
          const x = f64(xs.slice(0, n), [n]);
          const [out, pull] = T.vjp((p: { x: T.Tensor }) => ({ sq: T.square(p.x), tot: T.sum(p.x) }), { x });
          expect(out.sq.shape).toEqual([n]);
          const ct = { sq: f64(cs.slice(0, n), [n]), tot: f64([2], []) };
          for (let rep = 0; rep < 2; rep++) {
            const g = pull(ct).x.dataSync();
            close(
              g,
              xs.slice(0, n).map((v, i) => 2 * v * cs[i]! + 2),
              1e-12,
            );
          }
          pull.dispose();
          expect(() => pull(ct)).toThrow(T.ArgumentError);
        },
      ),
      { numRuns: 20 },
    ));
});

describe('memory lifetimes', () => {
  it('repeated valueAndGrad leaves live tensors and backend memory flat', () => {
    const backend = T.getDefaultBackend();
    const params = {
      w: T.tensor([
        [0.1, -0.2],
        [0.3, 0.4],
      ]),
      b: T.tensor([0.0, 0.1]),
    };
    const x = T.tensor([
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    const step = T.valueAndGrad((p: typeof params) => T.mean(T.square(T.tanh(T.add(T.matmul(x, p.w), p.b)))));
    const run = (): void => {
      const [v, g] = step(params);
      T.dispose([v, g]);
    };
    run();
    const before = { tensors: T.liveTensors(), ...backend.memory() };
    for (let i = 0; i < 50; i++) run();
    expect({ tensors: T.liveTensors(), ...backend.memory() }).toEqual(before);
  });

  it('tidy frees what it made except what it returns; a disposed tensor cannot be used', () => {
    const live = T.liveTensors();
    const kept = T.tidy(() => {
      const a = T.tensor([1, 2, 3]);
      const b = T.exp(a);
      return T.add(b, 1);
    });
    expect(T.liveTensors()).toBe(live + 1);
    kept.dispose();
    expect(T.liveTensors()).toBe(live);
    expect(() => T.exp(kept)).toThrow(T.DisposedTensorError);
  });

  it('disposing an intermediate inside a differentiated function is safe (the tape holds its own reference)', () => {
    const g = T.grad((x: T.Tensor) => {
      const y = T.exp(x);
      const z = T.mul(y, 2);
      y.dispose();
      return T.sum(z);
    })(f64([0, 1], [2])).dataSync();
    close(g, [2, 2 * Math.E]);
  });
});

describe('typed errors at the op boundary', () => {
  it('a shape error names the op and both shapes', () => {
    const a = T.zeros([2, 3]);
    const b = T.zeros([4, 5]);
    expect(() => T.matmul(a, b)).toThrow(/matmul: inner dimensions differ \(3 vs 4\) \(shapes \[2, 3\] and \[4, 5\]\)/);
    expect(() => T.add(T.zeros([2, 3]), T.zeros([3, 2]))).toThrow(T.ShapeError);
    expect(() => T.add(T.zeros([2, 3]), T.zeros([3, 2]))).toThrow(/add: cannot broadcast.*\[2, 3\] and \[3, 2\]/);
  });
  it('gather needs i32 indices; grad needs a scalar output; reshape must keep the size', () => {
    expect(() => T.gather(T.zeros([3, 2]), T.tensor([0, 1]), 0)).toThrow(T.DTypeError);
    expect(() => T.grad((x: T.Tensor) => T.square(x))(T.zeros([2]))).toThrow(/scalar/);
    expect(() => T.reshape(T.zeros([2, 3]), [4, 2])).toThrow(/reshape.*\[2, 3\] and \[4, 2\]/);
  });
  it('mixing backends is a typed error', () => {
    const other = new T.CpuBackend();
    expect(() => T.add(T.zeros([2]), T.zeros([2], { backend: other }))).toThrow(T.BackendMismatchError);
  });
});

describe('broadcasting follows NumPy', () => {
  it('broadcastShapes agrees with a reference statement of the rule', () =>
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 4 }),
        (a, b) => {
          const rank = Math.max(a.length, b.length);
          const pa = [...Array(rank - a.length).fill(1), ...a];
          const pb = [...Array(rank - b.length).fill(1), ...b];
          const ok = pa.every((d, i) => d === pb[i] || d === 1 || pb[i] === 1);
          if (!ok) expect(() => T.broadcastShapes('t', a, b)).toThrow(T.ShapeError);
          else expect(T.broadcastShapes('t', a, b)).toEqual(pa.map((d, i) => Math.max(d, pb[i]!)));
        },
      ),
    ));
});

describe('debugNans', () => {
  it('names the op that first produced a NaN, forward or backward', () => {
    T.setDebugNans(true);
    try {
      expect(() => T.log(T.tensor([1, -1]))).toThrow(/log output: non-finite value NaN at flat index 1/);
      expect(() => T.grad((x: T.Tensor) => T.sum(T.sqrt(x)))(T.tensor([0, 1]))).toThrow(
        /div output: non-finite value Infinity at flat index 0/,
      );
      expect(T.exp(T.tensor([0])).dataSync()[0]).toBe(1);
    } finally {
      T.setDebugNans(false);
    }
    expect(Number.isNaN(T.log(T.tensor([-1])).dataSync()[0])).toBe(true);
  });
});

describe('edge values', () => {
  it('logsumexp of an all -Infinity row is -Infinity with a zero (not NaN) gradient', () => {
    const x = f64([-Infinity, -Infinity, 0, 1], [2, 2]);
    const [v, g] = T.valueAndGrad((p: T.Tensor) => T.sum(T.maximum(T.logsumexp(p, 1), -50)))(x);
    expect(v.itemSync()).toBeCloseTo(-50 + Math.log(Math.E + 1), 12);
    const gv = Array.from(g.dataSync());
    expect(gv.slice(0, 2)).toEqual([0, 0]);
    close(gv.slice(2), [1 / (1 + Math.E), Math.E / (1 + Math.E)]);
  });
});

describe('a rule that folds the gathered cotangent into its own result (absorbed)', () => {
  /**
   * y = c * x as a one-off op whose rule, offered the cotangent x gathered so far, returns `absorbed(prior +
   * c g)`, as the fused norm and matmul backward kernels do. `seen` counts the priors it was offered.
   */
  const scaled = (x: T.Tensor, c: number, seen: { n: number }): T.Tensor =>
    runOp(
      'scaled',
      [x],
      x.shape,
      x.dtype,
      (k) => k.binary('mul', kt('scaled', x), kt('scaled', T.scalar(c, { dtype: x.dtype })), x.shape),
      () => (g, _needs, prior) => {
        const own = T.mul(g, c);
        if (!prior[0]) return [own];
        seen.n++;
        return [absorbed(T.add(prior[0], own))];
      },
    );

  it('the total is counted once: d/dx [sum(3x) + sum(scaled(x, 2))] = 5, whichever path the tape visits first', () => {
    const x = f64([1, -2, 0.5], [3]);
    const seen = { n: 0 };
    const g1 = T.grad((v: T.Tensor) => T.add(T.sum(T.mul(v, 3)), T.sum(scaled(v, 2, seen))))(x).dataSync();
    const g2 = T.grad((v: T.Tensor) => T.add(T.sum(scaled(v, 2, seen)), T.sum(T.mul(v, 3))))(x).dataSync();
    close(g1, [5, 5, 5]);
    close(g2, [5, 5, 5]);
    // At least one of the two orders offered the rule a prior (else the test would not exercise the fold).
    expect(seen.n).toBeGreaterThan(0);
  });

  it('an input in two places of one op is offered its prior once: d/dx sum(x * x + 4x) with a folding product', () => {
    const seen = { n: 0 };
    // p = x * x whose rule folds the prior into the first place's result and marks the second too.
    const square = (v: T.Tensor): T.Tensor =>
      runOp(
        'square2',
        [v, v],
        v.shape,
        v.dtype,
        (k) => k.binary('mul', kt('s', v), kt('s', v), v.shape),
        () => (g, _n, prior) => {
          if (prior[0]) seen.n++;
          const half = T.mul(g, v);
          return [prior[0] ? absorbed(T.add(prior[0], half)) : half, absorbed(half)];
        },
      );
    const xs = [1.5, -1, 0.25];
    const g = T.grad((v: T.Tensor) => T.sum(T.add(square(v), T.mul(v, 4))))(f64(xs, [3])).dataSync();
    close(
      g,
      xs.map((x) => 2 * x + 4),
    );
    expect(seen.n).toBe(1);
  });
});

describe('second order through a folded matmul', () => {
  it('d/dx sum((grad_x f) V * C) = C V^T W W^T for f(x) = 0.5 |x W|^2 + sum(x V), x feeding both products', () =>
    fc.assert(
      fc.property(fc.array(finite, { minLength: 6 + 12 + 6 + 4, maxLength: 6 + 12 + 6 + 4 }), (vs) => {
        const [x, w, v, c] = [
          f64(vs.slice(0, 6), [2, 3]),
          f64(vs.slice(6, 18), [3, 4]),
          f64(vs.slice(18, 24), [3, 2]),
          f64(vs.slice(24), [2, 2]),
        ];
        // grad_x f = (x W) W^T + 1 V^T: the tape visits x W's product first, and x V's rule folds its dA, which
        // depends on x, in as the addend: the outer derivative reaches x through the addend's rule.
        const f = (t: T.Tensor): T.Tensor => T.add(T.sum(T.matmul(t, v)), T.mul(T.sum(T.square(T.matmul(t, w))), 0.5));
        const h = (t: T.Tensor): T.Tensor => T.sum(T.mul(T.matmul(T.grad(f)(t), v), c));
        // h(x) = sum(((x W W^T + 1 V^T) V) * C): dh/dx = C V^T W W^T.
        const got = T.grad(h)(x).dataSync();
        const W = w.dataSync();
        const V = v.dataSync();
        const C = c.dataSync();
        const want: number[] = [];
        for (let i = 0; i < 2; i++)
          for (let j = 0; j < 3; j++) {
            let s = 0;
            for (let k = 0; k < 3; k++) {
              let cv = 0; // (C V^T)[i, k]
              for (let q = 0; q < 2; q++) cv += C[i * 2 + q]! * V[k * 2 + q]!;
              let ww = 0; // (W W^T)[k, j]
              for (let q = 0; q < 4; q++) ww += W[k * 4 + q]! * W[j * 4 + q]!;
              s += cv * ww;
            }
            want.push(s);
          }
        close(got, want, 1e-10);
      }),
      { numRuns: 30 },
    ));
});

describe('a fused backward kernel does not fold a prior an outer tape tracks', () => {
  it("d/da of grad_x [sum(rmsNorm(x)) + a sum(x)] . C = sum(C): the prior a reaches the norm's rule", () => {
    const x = f64([0.5, -1, 2, 0.25, 1.5, -0.75], [2, 3]);
    const w = f64([1, 0.5, -2], [3]);
    const c = f64([1, 2, -1, 0.5, 0.25, 3], [2, 3]);
    // The tape visits x * a before the norm, so the norm's rule is offered a prior (g a) the outer tape tracks:
    // folding it into the norm's backward kernel (which refuses a second derivative) would throw here.
    const h = (a: T.Tensor): T.Tensor =>
      T.sum(T.mul(T.grad((v: T.Tensor) => T.add(T.sum(T.rmsNorm(v, w)), T.sum(T.mul(v, a))))(x), c));
    const got = T.grad(h)(f64([0.3], [1])).dataSync();
    close(got, [Array.from(c.dataSync()).reduce((s, v) => s + v, 0)]);
  });
});
