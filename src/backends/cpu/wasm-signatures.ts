/**
 * Which parameters of a module's exported functions are i64, read from its binary: a memory64 build's addresses
 * (`usize`) are i64, which JavaScript must pass as BigInt (a Number there is a TypeError), and the JavaScript API
 * does not say a function's parameter types. Reads the type, import, function and export sections; anything but
 * plain function types (no GC types in these modules) is refused.
 */

const I64 = 0x7e;

class Reader {
  at = 0;
  constructor(private readonly bytes: Uint8Array) {}

  byte(): number {
    if (this.at >= this.bytes.length) throw new Error('a WebAssembly module ends early');
    return this.bytes[this.at++]!;
  }

  /** An unsigned LEB128 number (up to 2^53: a memory64's limits are read and skipped). */
  leb(): number {
    let value = 0;
    for (let scale = 1; ; scale *= 128) {
      const b = this.byte();
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
    }
  }

  skip(n: number): void {
    this.at += n;
  }

  skipName(): void {
    this.skip(this.leb());
  }

  /** Table or memory limits: flags (bit 0: a maximum follows), the minimum, the maximum. */
  skipLimits(): void {
    const flags = this.byte();
    this.leb();
    if (flags & 1) this.leb();
  }
}

/** Each exported function's i64 parameter positions, by export name (functions without any map to []). */
export function i64Params(bytes: Uint8Array): Map<string, number[]> {
  const r = new Reader(bytes);
  r.skip(8); // magic and version
  const types: number[][] = [];
  const functionTypes: number[] = [];
  const exports = new Map<string, number[]>();
  while (r.at < bytes.length) {
    const id = r.byte();
    const size = r.leb();
    const end = r.at + size;
    if (id === 1) {
      for (let n = r.leb(); n > 0; n--) {
        if (r.byte() !== 0x60) throw new Error('a WebAssembly type that is not a function type');
        const params: number[] = [];
        for (let p = r.leb(), i = 0; i < p; i++) if (r.byte() === I64) params.push(i);
        r.skip(r.leb()); // results: one byte each
        types.push(params);
      }
    } else if (id === 2) {
      for (let n = r.leb(); n > 0; n--) {
        r.skipName();
        r.skipName();
        const kind = r.byte();
        if (kind === 0) functionTypes.push(r.leb());
        else if (kind === 1) {
          r.byte();
          r.skipLimits();
        } else if (kind === 2) r.skipLimits();
        else if (kind === 3) r.skip(2);
        else if (kind === 4) {
          r.byte();
          r.leb();
        } else throw new Error(`a WebAssembly import of unknown kind ${kind}`);
      }
    } else if (id === 3) {
      for (let n = r.leb(); n > 0; n--) functionTypes.push(r.leb());
    } else if (id === 7) {
      for (let n = r.leb(); n > 0; n--) {
        const length = r.leb();
        const name = new TextDecoder().decode(bytes.subarray(r.at, r.at + length));
        r.skip(length);
        const kind = r.byte();
        const index = r.leb();
        if (kind === 0) exports.set(name, types[functionTypes[index]!] ?? []);
      }
    }
    r.at = end;
  }
  return exports;
}
