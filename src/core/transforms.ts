import { isHalf } from './dtype.js';
import { ArgumentError, DTypeError, ShapeError } from './errors.js';
import { kernelsFor } from './kernels.js';
import { treeLeaves, treeMap, treeUnflatten } from './pytree.js';
import { tidy } from './scope.js';
import { recordOp, Tape, withoutTapes, withTape } from './tape.js';
import { Tensor } from './tensor.js';

/**
 * The JAX-style function transformations: `grad`, `valueAndGrad`, `vjp` over pytrees of tensors, and
 * `stopGradient`. Each differentiates with respect to the first argument (a pytree: usually the parameters).
 *
 * One `valueAndGrad` call: (1) open a tidy scope; (2) alias every leaf of the first argument as a fresh tensor
 * watched by a new tape; (3) run f with the tape active, each op recording its vector-Jacobian rule; (4) seed
 * the output's cotangent with ones and walk the tape in reverse topological order; (5) leaves f did not use get
 * zeros; (6) return the value and the gradient pytree, freeing every intermediate and the tape.
 */

/** A new handle over the same storage with no link to any tape: gradients stop here. */
export function stopGradient<T>(tree: T): T {
  return treeMap(tree, (t) => {
    t.storageFor('stopGradient');
    return Tensor.view(t, t.shape);
  });
}

/** An identity op that tapes do record, so a nested transformation stays connected to outer ones. */
function alias(op: string, t: Tensor): Tensor {
  t.storageFor(op);
  const y = Tensor.view(t, t.shape);
  recordOp('alias', [t], y, (g) => [g]);
  return y;
}

function filled(like: Tensor, value: number): Tensor {
  // Filled by the backend's kernel directly so this module does not depend on the op layer.
  const storage = kernelsFor(like.backend).fill(like.shape, like.dtype, value);
  return Tensor.fromStorage(like.backend, storage, like.shape, like.dtype);
}

interface Traced<Out> {
  readonly tape: Tape;
  readonly primals: Tensor[];
  readonly out: Out;
}

function trace<P, Out>(op: string, f: (params: P) => Out, params: P): Traced<Out> {
  const tape = new Tape();
  const primals: Tensor[] = [];
  // A bf16/f16 tensor is frozen storage: no gradient can be written into it, so it is refused as a leaf here
  // (before anything is traced) rather than met by a rule halfway through a backward pass.
  treeLeaves(params).forEach((t, i) => {
    if (isHalf(t.dtype))
      throw new DTypeError(
        op,
        `leaf ${i} of the differentiated argument is ${t.dtype}: bf16/f16 tensors are frozen and get no gradient ` +
          '(pass them in another argument)',
      );
  });
  const watched = treeMap(params, (t) => {
    const a = alias(op, t);
    tape.watch(a);
    primals.push(a);
    return a;
  });
  try {
    return { tape, primals, out: withTape(tape, () => f(watched)) };
  } catch (e) {
    tape.dispose();
    throw e;
  }
}

/** The gradient pytree: computed cotangents, zeros for unused leaves, and no handle shared by two leaves. */
function gradTree<P>(params: P, grads: readonly (Tensor | null)[]): P {
  const seen = new Set<Tensor>();
  return treeMap(params, (leaf, i) => {
    const g = grads[i];
    if (!g) return filled(leaf, 0);
    if (seen.has(g)) return Tensor.view(g, g.shape);
    seen.add(g);
    return g;
  });
}

function checkScalar(op: string, out: unknown): Tensor {
  if (!(out instanceof Tensor))
    throw new ArgumentError(op, 'the function must return a Tensor (use { hasAux: true } to return [loss, aux])');
  if (out.size !== 1) throw new ShapeError(op, [out.shape], 'the function must return a scalar (size-1) tensor');
  return out;
}

export type ValueAndGradFn<P, A extends unknown[]> = (params: P, ...rest: A) => [Tensor, P];
export type ValueAndGradAuxFn<P, A extends unknown[], Aux> = (params: P, ...rest: A) => [[Tensor, Aux], P];

/**
 * Value and gradient of a scalar function with respect to its first argument (a pytree of tensors).
 * With `{ hasAux: true }`, f returns [scalar, aux] and aux (metrics, say) is passed through undifferentiated.
 */
export function valueAndGrad<P, A extends unknown[]>(f: (params: P, ...rest: A) => Tensor): ValueAndGradFn<P, A>;
export function valueAndGrad<P, A extends unknown[], Aux>(
  f: (params: P, ...rest: A) => [Tensor, Aux],
  opts: { hasAux: true },
): ValueAndGradAuxFn<P, A, Aux>;
export function valueAndGrad<P, A extends unknown[], Aux>(
  f: (params: P, ...rest: A) => Tensor | [Tensor, Aux],
  opts: { hasAux?: boolean } = {},
): (params: P, ...rest: A) => [Tensor | [Tensor, Aux], P] {
  return (params, ...rest) =>
    tidy(() => {
      const { tape, primals, out: raw } = trace('valueAndGrad', (p: P) => f(p, ...rest), params);
      try {
        if (opts.hasAux && (!Array.isArray(raw) || raw.length !== 2)) {
          throw new ArgumentError('valueAndGrad', 'with hasAux the function must return [scalar, aux]');
        }
        const out = checkScalar('valueAndGrad', opts.hasAux ? (raw as [Tensor, Aux])[0] : raw);
        const grads = tape.backward([[out, filled(out, 1)]], primals);
        const value: Tensor | [Tensor, Aux] = opts.hasAux ? [out, (raw as [Tensor, Aux])[1]] : out;
        return [value, gradTree(params, grads)] as [Tensor | [Tensor, Aux], P];
      } finally {
        tape.dispose();
      }
    });
}

/** The gradient of a scalar function with respect to its first argument, as a pytree of the same structure. */
export function grad<P, A extends unknown[]>(f: (params: P, ...rest: A) => Tensor): (params: P, ...rest: A) => P {
  const vg = valueAndGrad(f);
  return (params, ...rest) => {
    const [value, g] = vg(params, ...rest);
    value.dispose();
    return g;
  };
}

export interface VjpFn<P, Out> {
  (cotangent: Out): P;
  /** Release what the recorded tape holds. Calling the pullback afterwards throws. */
  dispose(): void;
}

/**
 * Evaluate f at `params` and return its output with the pullback: a function taking a cotangent of the output
 * (same structure) to a cotangent of `params`. The pullback may be called many times; `dispose()` it when done.
 */
export function vjp<P, Out>(f: (params: P) => Out, params: P): [Out, VjpFn<P, Out>] {
  let traced!: Traced<Out>;
  // Intermediates leave this scope; the tape keeps its own references to what the pullback needs.
  tidy(() => {
    traced = trace('vjp', f, params);
    return traced.out;
  });
  const outs = treeLeaves(traced.out);
  let disposed = false;
  const pullback = ((cotangent: Out): P =>
    tidy(() => {
      if (disposed) throw new ArgumentError('vjp', 'the pullback was called after dispose()');
      const cts = treeLeaves(cotangent);
      if (cts.length !== outs.length)
        throw new ArgumentError('vjp', `cotangent has ${cts.length} tensors, the output ${outs.length}`);
      outs.forEach((o, i) => {
        const ct = cts[i]!;
        if (ct.shape.length !== o.shape.length || ct.shape.some((d, k) => d !== o.shape[k])) {
          throw new ShapeError('vjp', [o.shape, ct.shape], 'cotangent shape differs from the output');
        }
      });
      return gradTree(
        params,
        traced.tape.backward(
          outs.map((o, i) => [o, cts[i]!] as const),
          traced.primals,
        ),
      );
    })) as VjpFn<P, Out>;
  pullback.dispose = () => {
    disposed = true;
    traced.tape.dispose();
  };
  return [traced.out, pullback];
}

/**
 * `jax.checkpoint` (rematerialisation): `checkpoint(f)(args)` computes f(args) without keeping f's intermediates for
 * the backward pass; the one node it records recomputes them from `args` when its cotangent arrives, and
 * differentiates only the leaves some tape watches (frozen weights among `args` get no gradient). It trades a
 * second forward of f for f's activations: a transformer layer under it keeps only its input. f must be a pure
 * function of `args` (every tensor it reads among them, so the tape keeps them alive) and deterministic.
 */
export function checkpoint<A>(f: (args: A) => Tensor): (args: A) => Tensor {
  return (args) => {
    const leaves = treeLeaves(args);
    const out = withoutTapes(() => tidy(() => f(args)));
    recordOp('checkpoint', leaves, out, (cotangent, needs) => {
      const wanted = leaves.flatMap((_, i) => (needs[i] ? [i] : []));
      const grads = new Array<Tensor | null>(leaves.length).fill(null);
      if (wanted.length === 0) return grads;
      const ofWanted = (sub: readonly Tensor[]): A => {
        const all = [...leaves];
        wanted.forEach((i, k) => {
          all[i] = sub[k]!;
        });
        return treeUnflatten(args, all);
      };
      const computed = tidy(() => {
        const [, pullback] = vjp(
          (sub: Tensor[]) => f(ofWanted(sub)),
          wanted.map((i) => leaves[i]!),
        );
        try {
          return pullback(cotangent);
        } finally {
          pullback.dispose();
        }
      });
      wanted.forEach((i, k) => {
        grads[i] = computed[k]!;
      });
      return grads;
    });
    return out;
  };
}
