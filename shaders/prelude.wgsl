// Scalar helpers the elementwise expressions of src/core/elementwise-kernels.ts call. Each matches the reference
// kernels' semantics, written to stay finite where a direct formula would overflow.

const GELU_C: f32 = 0.7978845608028654; // sqrt(2 / pi)

// tanh(x) is +-1 to f32 precision beyond |x| = 15; clamping keeps exp-based implementations from inf / inf.
fn safe_tanh(x: f32) -> f32 {
  return tanh(clamp(x, -15.0, 15.0));
}

// 1 / (1 + exp(-x)) without overflow for large |x| (as the reference kernel: exp of a non-positive number only).
fn safe_sigmoid(x: f32) -> f32 {
  let e = exp(-abs(x));
  return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

fn gelu_inner(x: f32) -> f32 {
  return GELU_C * (x + 0.044715 * x * x * x);
}

// GELU, tanh approximation (GPT-2 / JAX default).
fn gelu(x: f32) -> f32 {
  return 0.5 * x * (1.0 + safe_tanh(gelu_inner(x)));
}

fn gelu_grad(x: f32) -> f32 {
  let t = safe_tanh(gelu_inner(x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
}

fn silu_grad(x: f32) -> f32 {
  let s = safe_sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

// Runtime values: a constant expression may not evaluate to inf or NaN in WGSL.
fn f32_inf() -> f32 {
  var bits = 0x7f800000u;
  return bitcast<f32>(bits);
}

fn f32_nan() -> f32 {
  var bits = 0x7fc00000u;
  return bitcast<f32>(bits);
}

// Math.pow semantics for real a, b: WGSL's pow is undefined for a <= 0. x^0 = 1 (even 0^0 and NaN^0);
// 0^b is 0 (b > 0) or inf (b < 0); a negative base needs an integer exponent (its parity gives the sign).
fn safe_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0) {
    return 1.0;
  }
  if (a > 0.0) {
    return exp2(b * log2(a));
  }
  if (a == 0.0) {
    return select(f32_inf(), 0.0, b > 0.0);
  }
  if (a < 0.0 && floor(b) == b) {
    let m = exp2(b * log2(-a));
    let odd = abs(b - 2.0 * floor(b * 0.5)) == 1.0;
    return select(m, -m, odd);
  }
  return f32_nan();
}
