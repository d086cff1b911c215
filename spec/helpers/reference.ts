/** Plain-loop reference arrays for checking forward values, independent of the engine's kernels. */
export class Ref {
  constructor(
    readonly shape: number[],
    readonly values: number[],
  ) {}
  static fill(shape: number[], f: (idx: number[]) => number): Ref {
    const n = shape.reduce((a, b) => a * b, 1);
    const values: number[] = [];
    for (let i = 0; i < n; i++) values.push(f(Ref.unravel(shape, i)));
    return new Ref(shape, values);
  }
  static unravel(shape: number[], flat: number): number[] {
    const idx = new Array<number>(shape.length);
    for (let d = shape.length - 1; d >= 0; d--) {
      idx[d] = flat % shape[d]!;
      flat = Math.floor(flat / shape[d]!);
    }
    return idx;
  }
  at(idx: number[]): number {
    let flat = 0;
    for (let d = 0; d < this.shape.length; d++) flat = flat * this.shape[d]! + idx[d]!;
    return this.values[flat]!;
  }
  /** Read with NumPy broadcasting from an index into a (larger) output shape. */
  atBroadcast(outIdx: number[]): number {
    const off = outIdx.length - this.shape.length;
    return this.at(this.shape.map((d, i) => (d === 1 ? 0 : outIdx[off + i]!)));
  }
}
