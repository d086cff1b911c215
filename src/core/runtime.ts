import type { Backend } from './backend.js';
import { BackendError } from './errors.js';

/**
 * The backend new tensors go to when none is named. The core knows no backend: the backend registry
 * (`backends/registry.ts`, loaded by the package entry) installs a factory for the CPU backend, which runs on first
 * use unless `setDefaultBackend` named another.
 */
let defaultBackend: Backend | null = null;
let makeDefault: (() => Backend) | null = null;

export function getDefaultBackend(): Backend {
  if (defaultBackend === null) {
    if (makeDefault === null) {
      throw new BackendError('default', 'no default backend: import the package entry or call setDefaultBackend');
    }
    defaultBackend = makeDefault();
  }
  return defaultBackend;
}

export function setDefaultBackend(backend: Backend): void {
  defaultBackend = backend;
}

/** What `getDefaultBackend` builds on first use when no backend was set. */
export function setDefaultBackendFactory(make: () => Backend): void {
  makeDefault = make;
}
