/** Small helpers shared by the benchmarks: flags, medians, and the header every benchmark prints. */
import { cpus } from 'node:os';
import type { WebGpuBackend } from '../../src/index.js';

/** The value after `--name` on the command line, or `--name=value`. */
export function argValue(name: string): string | undefined {
  const argv = process.argv;
  const i = argv.indexOf(name);
  if (i >= 0) return argv[i + 1];
  const eq = argv.find((a) => a.startsWith(`${name}=`));
  return eq?.slice(name.length + 1);
}

export const hasFlag = (name: string): boolean => process.argv.includes(name);

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/** The adapter line (and machine) every benchmark prints first, so figures are never read without it. */
export function printHeader(
  name: string,
  backend: WebGpuBackend,
  log: (line: string) => void = (line) => console.log(line),
): void {
  log(`${name} | adapter: ${backend.adapter.summary}`);
  log(`node ${process.version}, ${cpus().length} CPU cores, ${new Date().toISOString()}`);
}
