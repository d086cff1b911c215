import { ArgumentError, ShapeError, type Shape } from './errors.js';

export type { Shape };

export const sizeOf = (shape: Shape): number => shape.reduce((a, b) => a * b, 1);

export function stridesOf(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i]!;
  }
  return strides;
}

export const shapesEqual = (a: Shape, b: Shape): boolean => a.length === b.length && a.every((d, i) => d === b[i]);

/** NumPy broadcasting: align from the right; each pair of dims must be equal or one of them 1. */
export function broadcastShapes(op: string, ...shapes: Shape[]): number[] {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out = new Array<number>(rank).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const o = rank - s.length + i;
      const d = s[i]!;
      if (out[o] === 1) out[o] = d;
      else if (d !== 1 && d !== out[o])
        throw new ShapeError(op, shapes, `cannot broadcast dimension ${d} against ${out[o]}`);
    }
  }
  return out;
}

/** Strides for reading `shape` as if broadcast to `outShape` (0 on broadcast axes). */
export function broadcastStrides(shape: Shape, outShape: Shape): number[] {
  const strides = stridesOf(shape);
  const out = new Array<number>(outShape.length).fill(0);
  const offset = outShape.length - shape.length;
  for (let i = 0; i < shape.length; i++) out[offset + i] = shape[i] === 1 ? 0 : strides[i]!;
  return out;
}

/** Normalise a possibly negative axis against `rank`. */
export function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank)
    throw new ArgumentError(op, `axis ${axis} is out of range for rank ${rank}`);
  return a;
}

/** Normalise an axis list (undefined = all axes), sorted and without duplicates. */
export function normAxes(op: string, axes: number | readonly number[] | undefined, rank: number): number[] {
  if (axes === undefined) return [...Array(rank).keys()];
  const list = typeof axes === 'number' ? [axes] : axes;
  const norm = list.map((a) => normAxis(op, a, rank));
  if (new Set(norm).size !== norm.length) throw new ArgumentError(op, `repeated axis in [${list.join(', ')}]`);
  return norm.sort((a, b) => a - b);
}

export function assertShape(op: string, shape: Shape): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0)
      throw new ArgumentError(op, `invalid dimension ${d} in shape [${shape.join(', ')}]`);
  }
}
