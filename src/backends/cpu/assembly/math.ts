// exp on four f32 lanes (Cephes' expf: e^x = 2^n e^r, |r| <= ln2 / 2, a degree-6 polynomial for e^r), about 1 ulp.
// Below -87.3 it is exactly 0 (as a scalar exp underflows: masked attention scores and padding rely on it), above
// 88.7 it is +Infinity, and NaN stays NaN.

const LOG2E: f32 = 1.44269504088896341;
const C1: f32 = 0.693359375;
const C2: f32 = -2.12194440e-4;
const HI: f32 = 88.7228391;
const LO: f32 = -87.3365448;

/**
 * a * b + c on four lanes: one fused multiply-add (a single rounding) in the module built with relaxed SIMD, a
 * multiply then an add in the plain one. Decided when the module is compiled, so a kernel has one body per build.
 */
@inline export function madd(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, c);
  return f32x4.add(f32x4.mul(a, b), c);
}

// The clamp uses pmin/pmax (one minps/maxps each; wasm's min/max cost V8 about 8 instructions for their NaN and
// signed-zero rules): the bounds are far from 0, and a NaN x passes through either way (every comparison with it is
// false). n is an integer in [-128, 128], so n + 1.5 * 2^23 is exact and its low bits are n's (two instructions
// for V8's seven of a saturating conversion). The same values as min/max and trunc_sat, for every x.
const ROUNDER: f32 = 12582912; // 1.5 * 2^23

@inline export function exp4(x: v128): v128 {
  const xc = f32x4.pmin(f32x4.pmax(x, f32x4.splat(LO)), f32x4.splat(HI));
  const n = f32x4.nearest(f32x4.mul(xc, f32x4.splat(LOG2E)));
  const r = f32x4.sub(f32x4.sub(xc, f32x4.mul(n, f32x4.splat(C1))), f32x4.mul(n, f32x4.splat(C2)));
  let p = f32x4.splat(1.9875691500e-4);
  p = madd(p, r, f32x4.splat(1.3981999507e-3));
  p = madd(p, r, f32x4.splat(8.3334519073e-3));
  p = madd(p, r, f32x4.splat(4.1665795894e-2));
  p = madd(p, r, f32x4.splat(1.6666665459e-1));
  p = madd(p, r, f32x4.splat(5.0000001201e-1));
  p = f32x4.add(madd(p, f32x4.mul(r, r), r), f32x4.splat(1));
  // 2^n in two steps (n can be 128 at the top of the range, past a single f32 exponent).
  const ni = i32x4.sub(f32x4.add(n, f32x4.splat(ROUNDER)), f32x4.splat(ROUNDER));
  const half = i32x4.shr_s(ni, 1);
  const rest = i32x4.sub(ni, half);
  const s1 = i32x4.shl(i32x4.add(half, i32x4.splat(127)), 23);
  const s2 = i32x4.shl(i32x4.add(rest, i32x4.splat(127)), 23);
  let y = f32x4.mul(f32x4.mul(p, s1), s2);
  y = v128.bitselect(f32x4.splat(0), y, f32x4.lt(x, f32x4.splat(LO)));
  y = v128.bitselect(f32x4.splat(Infinity), y, f32x4.gt(x, f32x4.splat(HI)));
  // NaN: the comparisons above are false, and min/max keep NaN, so y is NaN already.
  return y;
}

/** exp of one f32 through the four-lane version (the same value as exp4's lanes). */
@inline export function exp1(x: f32): f32 {
  return f32x4.extract_lane(exp4(f32x4.splat(x)), 0);
}
