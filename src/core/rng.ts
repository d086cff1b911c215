/**
 * A small seeded generator (xoshiro128**, seeded by splitmix32) whose whole state is four 32-bit words, so a
 * checkpoint can save it and a resumed run draws exactly the same numbers.
 */
export interface RngState {
  readonly s: readonly [number, number, number, number];
  /** A cached second normal from Box-Muller, or null. */
  readonly spare: number | null;
}

export class Rng {
  private s: Uint32Array;
  private spare: number | null = null;

  constructor(seed: number) {
    this.s = new Uint32Array(4);
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
  }

  static fromState(state: RngState): Rng {
    const r = new Rng(0);
    r.s.set(state.s);
    r.spare = state.spare;
    return r;
  }

  state(): RngState {
    const [a, b, c, d] = this.s;
    return { s: [a!, b!, c!, d!], spare: this.spare };
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    const s = this.s;
    const result = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result;
  }

  /** Uniform in [0, 1) with 32 bits of resolution. */
  uniform(): number {
    return this.nextU32() / 4294967296;
  }

  /** A standard normal (Box-Muller). */
  normal(): number {
    if (this.spare !== null) {
      const v = this.spare;
      this.spare = null;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** A uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.uniform() * n);
  }

  /** An independent generator derived from this one (for a sub-task that must not shift this stream). */
  split(): Rng {
    return new Rng(this.nextU32());
  }
}

const rotl = (x: number, k: number): number => ((x << k) | (x >>> (32 - k))) >>> 0;
