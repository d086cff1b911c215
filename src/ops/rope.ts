import type { Storage } from '../core/backend.js';
import type { Kernels } from '../core/kernels.js';
import type { VjpRule } from '../core/tape.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { kt, runOp, runOpMulti } from './op.js';

/**
 * Rotate-half rotary embedding (the Hugging Face pairing) as one kernel: x [..., H, D] with cos and sin
 * [..., 1, D/2] (one row per leading index, shared by the heads): (x1 c - x2 s, x2 c + x1 s) for the halves
 * x1, x2 of the last axis. `inverse` rotates the other way. It is linear in x, and its adjoint is the inverse
 * rotation; cos and sin are constants (tables), not differentiated.
 */
export function rotary(x: Tensor, cos: Tensor, sin: Tensor, inverse = false): Tensor {
  check(x, cos, sin);
  return runOp(
    'rotary',
    [x, cos, sin],
    x.shape,
    x.dtype,
    (k) => k.rope([kt('rotary', x)], kt('rotary', cos), kt('rotary', sin), inverse)[0]!,
    rule(cos, sin, inverse),
  );
}

/** `rotary` of a layer's queries and keys (same leading dims, any head counts) in one kernel. */
export function rotaryPair(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor): [Tensor, Tensor] {
  check(q, cos, sin);
  check(k, cos, sin);
  const op = 'rotaryPair';
  const kernel = (kern: Kernels): readonly Storage[] =>
    kern.rope([kt(op, q), kt(op, k)], kt(op, cos), kt(op, sin), false);
  // Each output's cotangent rotates back into its own input (the adjoint of a rotation is its inverse).
  const rules = (): VjpRule[] => [
    (g) => [rotary(g, cos, sin, true), null, null, null],
    (g) => [null, rotary(g, cos, sin, true), null, null],
  ];
  const [q1, k1] = runOpMulti(op, [q, k, cos, sin], [q, k], kernel, rules);
  return [q1!, k1!];
}

const rule =
  (cos: Tensor, sin: Tensor, inverse: boolean) =>
  () =>
  (g: Tensor): (Tensor | null)[] => [rotary(g, cos, sin, !inverse), null, null];

function check(x: Tensor, cos: Tensor, sin: Tensor): void {
  const d = x.shape[x.rank - 1]!;
  const want = [...x.shape.slice(0, -2), 1, d / 2];
  const ok = (t: Tensor): boolean => t.rank === want.length && t.shape.every((n, i) => n === want[i]);
  if (x.rank < 2 || d % 2 !== 0 || !ok(cos) || !ok(sin)) {
    throw new ShapeError(
      'rotary',
      [x.shape, cos.shape, sin.shape],
      `x must be [..., H, D] with D even, cos and sin [${want.join(', ')}]`,
    );
  }
  if (cos.dtype !== x.dtype || sin.dtype !== x.dtype)
    throw new DTypeError('rotary', `cos and sin must be ${x.dtype}, got ${cos.dtype}, ${sin.dtype}`);
}
