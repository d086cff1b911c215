import { spawn } from 'node:child_process';

/**
 * Dawn (the WebGPU implementation behind the `webgpu` backend) writes warnings from native code straight to the
 * process's stderr while it looks for an adapter and creates the device: "Couldn't load Vulkan: libvulkan.so.1"
 * (no Vulkan driver: Dawn goes on to OpenGL ES / llvmpipe) and limits "artificially reduced" to fit its dynamic
 * offsets. They are not errors and say nothing about the run, and JavaScript cannot intercept a native write. So a
 * WebGPU run of the CLI runs as a child whose stderr passes through `dawnNoiseFilter`, unless RLVR_DEBUG is set.
 * The child keeps stdin and stdout (a progress bar still sees the terminal); signals and the exit status pass
 * through.
 */
export const CHILD_ENV = 'RLVR_CLI_CHILD';

/**
 * A line filter over a byte stream: drops Dawn's warning blocks (a `Warning: ` line, its `    at ...` lines and
 * the blank line after them; the CLI never prints a line starting with `Warning: `) and returns the other lines.
 */
export function dawnNoiseFilter(): { push(chunk: string): string[]; end(): string[] } {
  let pending = '';
  let inBlock = false;
  const keep = (line: string): boolean => {
    if (line.startsWith('Warning: ')) {
      inBlock = true;
      return false;
    }
    if (inBlock && (line.startsWith('    at ') || line.trim() === '')) return false;
    inBlock = false;
    return true;
  };
  return {
    push(chunk) {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      return lines.filter(keep);
    },
    end() {
      const last = pending;
      pending = '';
      return last === '' ? [] : [last].filter(keep);
    },
  };
}

/** Whether this invocation should run through the filter: a WebGPU training run, not asked to show Dawn's output. */
export function wantsQuietGpu(argv: readonly string[]): boolean {
  if (process.env[CHILD_ENV] || process.env.RLVR_DEBUG) return false;
  if (argv[0] !== 'train') return false;
  return argv.some((a, i) => a === '--backend=webgpu' || (a === '--backend' && argv[i + 1] === 'webgpu'));
}

/**
 * Run this CLI again as a child with the same arguments, its stderr filtered; resolves to its exit status. SIGINT
 * and SIGTERM are forwarded once (the child is in its own process group, so a terminal's Ctrl-C reaches it only
 * through this process), and the child stops at its next step if this process goes away (the IPC channel closes).
 */
export function runQuietChild(argv: readonly string[]): Promise<number> {
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...argv], {
    env: { ...process.env, [CHILD_ENV]: '1' },
    stdio: ['inherit', 'inherit', 'pipe', 'ipc'],
    detached: true,
  });
  const filter = dawnNoiseFilter();
  const write = (lines: string[]): void => {
    for (const line of lines) process.stderr.write(`${line}\n`);
  };
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => write(filter.push(chunk)));
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      write(filter.end());
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(code ?? (signal === 'SIGINT' ? 130 : signal === 'SIGKILL' ? 137 : 143));
    });
  });
}
