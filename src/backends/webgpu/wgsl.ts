import { BackendError } from '../../core/errors.js';
import type { DType } from '../../core/dtype.js';

/**
 * WGSL sources live in `shaders/*.wgsl`. Some bodies are templates with `{{NAME}}` placeholders (the element
 * type, a rank, a generated expression); `fillTemplate` fills them and refuses to leave one unfilled. What every
 * kernel declares (bindings, uniforms, workgroup size) is never a placeholder: program.ts generates it.
 */
export function fillTemplate(
  name: string,
  source: string,
  vars: Readonly<Record<string, string | number | boolean>>,
): string {
  return source.replace(/\{\{([A-Z0-9_]+)\}\}/g, (_, key: string) => {
    const v = vars[key];
    if (v === undefined) throw new BackendError('webgpu', `shader template ${name}: no value for {{${key}}}`);
    return String(v);
  });
}

/** The WGSL scalar type of a dtype the WebGPU backend stores (f64 is CPU-only). */
export function wgslType(op: string, dtype: DType): 'f32' | 'i32' {
  if (dtype === 'f32' || dtype === 'i32') return dtype;
  throw new BackendError('webgpu', `${op}: dtype ${dtype} is not supported on WebGPU (f64 is CPU-only)`);
}
