/** Messages between the training page and its worker (structured-cloned; the checkpoint's bytes are transferred). */
import type { MetricRecord, RolloutView, TrainConfig } from '../../src/index.js';

/**
 * Which backend the page asked for: `auto` takes WebGPU when the page has a hardware adapter, else the CPU backend
 * (also in place of a software adapter such as SwiftShader, which its WebAssembly kernels outrun).
 */
export type BackendChoice = 'auto' | 'webgpu' | 'cpu';

export interface StartMessage {
  readonly type: 'start';
  /** A training config as entered (validated by `parseTrainConfig` in the worker). */
  readonly config: Partial<TrainConfig>;
  readonly backend: BackendChoice;
}

export type FromWorker =
  | { readonly type: 'backend'; readonly name: string; readonly description: string; readonly note: string | null }
  | { readonly type: 'record'; readonly record: MetricRecord }
  | { readonly type: 'progress'; readonly phase: 'warmstart' | 'rl'; readonly step: number; readonly total: number }
  | { readonly type: 'rollouts'; readonly view: RolloutView }
  | {
      readonly type: 'done';
      readonly before: number | null;
      readonly after: number;
      readonly seconds: number;
      readonly checkpoint: ArrayBuffer;
    }
  | { readonly type: 'error'; readonly message: string };
