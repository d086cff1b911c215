// bf16 and f16 words (the low 16 bits of h) as the f32 values they encode, exactly. Kernels that read frozen
// weights stored two halves to a u32 word include these (src/backends/webgpu/kernels/half.ts adds the readers).
// f16 is converted with integer operations rather than unpack2x16float, so subnormals are exact whatever the
// implementation does with f16 subnormals: a subnormal m 2^-24 is f32(m) times 2^-24, an exact product.

fn bf16_to_f32(h: u32) -> f32 {
  return bitcast<f32>(h << 16u);
}

fn f16_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let em = h & 0x7fffu;
  if (em >= 0x7c00u) {
    return bitcast<f32>(sign | 0x7f800000u | ((em & 0x3ffu) << 13u));
  }
  if (em >= 0x0400u) {
    return bitcast<f32>(sign | ((em << 13u) + 0x38000000u));
  }
  return bitcast<f32>(sign | bitcast<u32>(f32(em) * 5.9604644775390625e-8));
}
