/**
 * The training worker: the whole library runs here, off the page's main thread. It opens the backend the page
 * asked for (WebGPU through navigator.gpu, or the CPU backend), runs `train` (warm-start, then RL) and posts every
 * metric record, the progress, each step's rollouts with their verdicts and, at the end, the trained policy as a
 * safetensors checkpoint. The page stops a run by terminating the worker.
 */
import * as E from 'fp-ts/lib/Either.js';
import {
  CpuBackend,
  NoAdapterError,
  checkpointToBytes,
  createWebGpuBackend,
  parseTrainConfig,
  train,
  type Backend,
} from '../../src/index.js';
import type { BackendChoice, FromWorker, StartMessage } from './protocol.js';

const post = (m: FromWorker, transfer: Transferable[] = []): void => self.postMessage(m, { transfer });

/** A WebGPU adapter that is a CPU rasterizer: the CPU backend's WebAssembly kernels are faster than it. */
const SOFTWARE_ADAPTER = /llvmpipe|lavapipe|softpipe|swiftshader/i;

async function openBackend(choice: BackendChoice): Promise<{ backend: Backend; note: string | null }> {
  if (choice === 'cpu') return { backend: new CpuBackend(), note: null };
  try {
    const gpu = await createWebGpuBackend();
    if (choice === 'auto' && SOFTWARE_ADAPTER.test(gpu.describe())) {
      const note = `WebGPU here is a software adapter (${gpu.describe()}); the CPU backend is faster`;
      gpu.dispose();
      return { backend: new CpuBackend(), note };
    }
    return { backend: gpu, note: null };
  } catch (e) {
    if (choice === 'auto' && e instanceof NoAdapterError) return { backend: new CpuBackend(), note: e.message };
    throw e;
  }
}

async function run(msg: StartMessage): Promise<void> {
  const { backend, note } = await openBackend(msg.backend);
  post({ type: 'backend', name: backend.name, description: backend.describe(), note });
  const cfg = parseTrainConfig({ ...msg.config, backend: backend.name as 'cpu' | 'webgpu' });
  if (E.isLeft(cfg)) throw cfg.left;
  const t0 = performance.now();
  const result = await train(cfg.right, {
    backend,
    onRecord: (record) => post({ type: 'record', record }),
    onProgress: ({ phase, step, total }) => post({ type: 'progress', phase, step, total }),
    onRollouts: (view) => post({ type: 'rollouts', view }),
  });
  const bytes = await checkpointToBytes({ config: result.config, params: result.params })();
  if (E.isLeft(bytes)) throw bytes.left;
  const checkpoint = bytes.right.buffer.slice(
    bytes.right.byteOffset,
    bytes.right.byteOffset + bytes.right.byteLength,
  ) as ArrayBuffer;
  const seconds = (performance.now() - t0) / 1000;
  post({ type: 'done', before: result.warmStart?.passAt1 ?? null, after: result.final.passAt1, seconds, checkpoint }, [
    checkpoint,
  ]);
}

self.onmessage = (ev: MessageEvent<StartMessage>) => {
  run(ev.data).catch((e: unknown) => post({ type: 'error', message: e instanceof Error ? e.message : String(e) }));
};
