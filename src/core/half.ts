import type { HalfDType } from './dtype.js';

/**
 * bf16 and f16 words: rounding f32 values into them (to nearest, ties to even, as PyTorch's `.to(torch.bfloat16)`
 * and `.to(torch.float16)` do) and widening them back (exact: every bf16 and f16 value is an f32 value).
 *
 * bf16 is the top half of an f32 (sign, 8 exponent bits, 7 mantissa bits), so widening is a 16-bit shift.
 * f16 is IEEE binary16 (5 exponent bits, 10 mantissa bits, subnormals below 2^-14): widening rebuilds the f32
 * fields. Numbers are first rounded to f32 (`Math.fround`), as a Float32Array holding them would.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The bits of `value` rounded to f32. */
export function f32Bits(value: number): number {
  f32[0] = value;
  return u32[0]!;
}

/** The f32 whose bits these are. */
export function fromF32Bits(bits: number): number {
  u32[0] = bits;
  return f32[0]!;
}

/** The bf16 word nearest an f32 (ties to even); NaN becomes the quiet NaN 0x7fc0, as in PyTorch. */
export function roundBf16(value: number): number {
  const bits = f32Bits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The f16 word nearest an f32 (ties to even, overflow to infinity); NaN becomes sign | 0x7e00, as in PyTorch. */
export function roundF16(value: number): number {
  const bits = f32Bits(value);
  const sign = (bits >>> 16) & 0x8000;
  const mag = bits & 0x7fffffff;
  if (mag > 0x7f800000) return sign | 0x7e00;
  // 65520 = 65504 + half an f16 step: the tie goes to the even neighbour, 65536, which is infinity.
  if (mag >= 0x477ff000) return sign | 0x7c00;
  if (mag >= 0x38800000) {
    // Normal in f16: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to even; a carry out of
    // the mantissa bumps the exponent, which is the right answer.
    return sign | ((mag - 0x38000000 + 0xfff + ((mag >>> 13) & 1)) >>> 13);
  }
  // Subnormal (or zero) in f16: units of 2^-24. The f32 value is m 2^(e - 150), m with its implicit bit.
  const e = mag >>> 23;
  const shift = 126 - e;
  if (shift > 24) return sign; // below 2^-25 (a quarter unit... or less): rounds to zero
  const m = (mag & 0x7fffff) | (e === 0 ? 0 : 0x800000);
  let q = m >>> shift;
  const rest = m - (q << shift);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (q & 1) === 1)) q++;
  return sign | q;
}

/** The f32 value of a bf16 word (exact). */
export const bf16Value = (word: number): number => fromF32Bits((word & 0xffff) << 16);

/** bf16's largest finite value, 0x7f7f: 3.3895e38 (f32's is 3.4028e38). */
export const BF16_MAX = bf16Value(0x7f7f);

/**
 * `values` for a bf16 file, with every finite value that bf16 would round to an infinity written as `BF16_MAX` (its
 * sign kept), and how many were. Those are |x| >= 3.3961e38, from half a bf16 step above `BF16_MAX` to f32's
 * largest: each moves by at most one bf16 step (0.4%), where rounding moves any value by up to half of one, and the
 * file loads as the finite model it was. NaN and the infinities are left as they are. A copy only when one changes.
 */
export function saturateBf16(values: Float32Array): { readonly values: Float32Array; readonly count: number } {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const overflows = (b: number): boolean => (b & 0x7fffffff) >= 0x7f7f8000 && (b & 0x7fffffff) < 0x7f800000;
  let count = 0;
  for (let i = 0; i < bits.length; i++) if (overflows(bits[i]!)) count++;
  if (count === 0) return { values, count };
  const out = Float32Array.from(values);
  for (let i = 0; i < bits.length; i++) if (overflows(bits[i]!)) out[i] = Math.sign(values[i]!) * BF16_MAX;
  return { values: out, count };
}

/** The f32 bits of an f16 word (exact; subnormals become f32 normals, NaN payloads are kept). */
export function f16ToF32Bits(word: number): number {
  const sign = (word & 0x8000) << 16;
  const exp = (word >>> 10) & 0x1f;
  let mant = word & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  if (exp !== 0) return (sign | ((exp + 112) << 23) | (mant << 13)) >>> 0;
  if (mant === 0) return sign >>> 0;
  // A subnormal m 2^-24: shift the mantissa up to its leading bit and lower the exponent to match.
  let e = 113;
  while ((mant & 0x400) === 0) {
    mant <<= 1;
    e--;
  }
  return (sign | (e << 23) | ((mant & 0x3ff) << 13)) >>> 0;
}

/** The f32 value of an f16 word (exact). */
export const f16Value = (word: number): number => fromF32Bits(f16ToF32Bits(word));

let f16Table: Uint32Array | null = null;

/** Every f16 word's f32 bits (256 KiB, made on first use): widening a tensor is then one load per element. */
function f16Bits(): Uint32Array {
  if (f16Table) return f16Table;
  f16Table = new Uint32Array(65536);
  for (let w = 0; w < 65536; w++) f16Table[w] = f16ToF32Bits(w);
  return f16Table;
}

/**
 * The f32 value of each word of `words` (exact, NaN payloads included: bits are copied as integers, never through
 * a JS number, which would quiet a signalling NaN), into `out` (default a new array).
 */
export function widenHalf(
  dtype: HalfDType,
  words: Uint16Array,
  out: Float32Array = new Float32Array(words.length),
): Float32Array {
  const o = new Uint32Array(out.buffer, out.byteOffset, words.length);
  if (dtype === 'bf16') for (let i = 0; i < words.length; i++) o[i] = words[i]! << 16;
  else {
    const table = f16Bits();
    for (let i = 0; i < words.length; i++) o[i] = table[words[i]!]!;
  }
  return out;
}

/** A function giving the f32 value of a word of `dtype`, for kernels that widen element by element. */
export function halfReader(dtype: HalfDType): (word: number) => number {
  if (dtype === 'bf16') return bf16Value;
  const table = new Float32Array(f16Bits().buffer);
  return (word) => table[word]!;
}

/** The words of `values` rounded to `dtype` (nearest, ties to even). */
export function roundToHalf(dtype: HalfDType, values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  const round = dtype === 'bf16' ? roundBf16 : roundF16;
  for (let i = 0; i < values.length; i++) out[i] = round(values[i]!);
  return out;
}
