/**
 * Which Node the project supports, and the one line the CLI prints on an older one. Node 20 reached end of life on
 * 2026-04-30; it lacks WebAssembly relaxed SIMD (the cpu backend's fused multiply-add kernels, Node >= 22) and
 * memory64 (memory past 4 GiB, Node >= 24). The CLI still runs there, on the plain kernels.
 */
export const OLDEST_SUPPORTED_NODE = 22;

/**
 * The line to print for this runtime, or undefined where it is supported (or not Node), or where
 * `RLVR_NO_RUNTIME_NOTE=1` silences it.
 */
export function unsupportedRuntimeLine(
  version: string | undefined = globalThis.process?.versions?.node,
  env: Record<string, string | undefined> = globalThis.process?.env ?? {},
): string | undefined {
  if (version === undefined || env.RLVR_NO_RUNTIME_NOTE === '1') return undefined;
  const major = Number(version.split('.')[0]);
  if (!(major < OLDEST_SUPPORTED_NODE)) return undefined;
  return (
    `rlvr: Node ${version} is unsupported (Node 20 reached end of life on 2026-04-30): running the plain cpu kernels, ` +
    `without fused multiply-add or memory past 4 GiB; use Node >= ${OLDEST_SUPPORTED_NODE} (26 is the current LTS; ` +
    '.ci/setup in a clone installs it)'
  );
}
