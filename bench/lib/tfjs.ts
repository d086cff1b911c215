/**
 * @tensorflow/tfjs-backend-webgpu on our backend's own GPUDevice, the peer the WebGPU benchmarks compare against
 * in the same process. tfjs's types pin an older @webgpu/types, so it is loaded untyped behind this small view.
 */
import type { WebGpuBackend } from '../../src/index.js';

export interface TfTensor {
  data(): Promise<Float32Array>;
  dispose(): void;
}

export interface Tf {
  tensor1d(values: Float32Array): TfTensor;
  tensor2d(values: Float32Array, shape: [number, number]): TfTensor;
  matMul(a: TfTensor, b: TfTensor, transposeA?: boolean, transposeB?: boolean): TfTensor;
  add(a: TfTensor, b: TfTensor): TfTensor;
  mul(a: TfTensor, b: TfTensor): TfTensor;
  sub(a: TfTensor, b: TfTensor): TfTensor;
  registerBackend(name: string, factory: () => unknown, priority?: number): boolean;
  removeBackend(name: string): void;
  setBackend(name: string): Promise<boolean>;
  ready(): Promise<void>;
  getBackend(): string;
  version_core: string;
  env(): { set(flag: string, value: boolean | number): void; getBool(flag: string): boolean };
}

export async function loadTfjs(ours: WebGpuBackend): Promise<Tf> {
  // tfjs looks for navigator.gpu and the GPU* constants; provide them only while its backend is created.
  const g = globalThis as Record<string, unknown>;
  const dawnGlobals = (await import('webgpu')).globals as Record<string, unknown>;
  const added = Object.keys(dawnGlobals).filter((k) => !(k in g));
  for (const k of added) g[k] = dawnGlobals[k];
  const hadNavigator = 'navigator' in g;
  const navigator = (g.navigator ?? {}) as Record<string, unknown>;
  if (!hadNavigator) Object.defineProperty(g, 'navigator', { value: navigator, configurable: true, writable: true });
  navigator.gpu = {};
  try {
    const tf = (await import('@tensorflow/tfjs-core')) as unknown as Tf;
    const backendModule = (await import('@tensorflow/tfjs-backend-webgpu')) as unknown;
    const { WebGPUBackend } = backendModule as { WebGPUBackend: new (d: GPUDevice) => unknown };
    const device = ours.runtime.device;
    // Importing the package registered a factory that requests its own adapter; use ours (same device) instead.
    tf.removeBackend('webgpu');
    tf.registerBackend('webgpu', () => new WebGPUBackend(device), 10);
    if (!(await tf.setBackend('webgpu'))) throw new Error('tfjs: could not set the webgpu backend');
    await tf.ready();
    return tf;
  } finally {
    delete navigator.gpu;
    if (!hadNavigator) delete g.navigator;
  }
}
