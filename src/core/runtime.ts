import type { Backend } from './backend.js';
import { CpuBackend } from '../backends/cpu/index.js';

/** The backend new tensors go to when none is named. The CPU backend unless `setDefaultBackend` says otherwise. */
let defaultBackend: Backend | null = null;

export function getDefaultBackend(): Backend {
  defaultBackend ??= new CpuBackend();
  return defaultBackend;
}

export function setDefaultBackend(backend: Backend): void {
  defaultBackend = backend;
}
