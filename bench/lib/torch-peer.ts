/**
 * The PyTorch peer on the same GPU (bench/torch_gpu.py, its model and step in bench/torch_model.py), one long-lived
 * process answering one JSON task a line, so the benchmark interleaves its rounds with the peer's without paying
 * CUDA's start-up each time.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Folders the project's root may be: the working directory (npm scripts), and two above this bundle (dist/bench/). */
function roots(): string[] {
  const here = dirname(fileURLToPath(import.meta.url));
  return [...new Set([process.cwd(), resolve(here, '..', '..'), resolve(here, '..', '..', '..')])];
}

const peerScript = (): string | null =>
  roots()
    .map((r) => resolve(r, 'bench', 'torch_gpu.py'))
    .find((p) => existsSync(p)) ?? null;

/** The next line that is a JSON object (the peer sends its library's prints to stderr; a stray one is skipped). */
async function nextAnswer(lines: AsyncIterableIterator<string>): Promise<string | null> {
  for (;;) {
    const r = await lines.next();
    if (r.done) return null;
    if (r.value.startsWith('{')) return r.value;
  }
}

export type PeerAnswer =
  | { readonly ms: number; readonly loss?: number; readonly tokens?: number }
  | { readonly absent: string };

export class TorchPeer {
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly lines: AsyncIterableIterator<string>,
    readonly description: string,
  ) {}

  /** Start the peer: the peer, or why there is none (no python3, no torch, no CUDA). */
  static async start(python = process.env.RLVR_PYTHON ?? 'python3'): Promise<TorchPeer | string> {
    const script = peerScript();
    if (!script) return 'bench/torch_gpu.py not found';
    const child = spawn(python, [script], { stdio: ['pipe', 'pipe', 'pipe'] });
    const failed = new Promise<string>((res) => child.once('error', (e) => res(`${python}: ${e.message}`)));
    child.stderr.on('data', () => {}); // warnings of torch/transformers: not ours to print
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const first = nextAnswer(lines);
    const line = await Promise.race([first, failed]);
    if (line === null || line.startsWith(python)) {
      child.kill();
      return line ?? `${python} ended before answering`;
    }
    const hello = JSON.parse(line) as { torch?: string; device?: string; absent?: string };
    if (hello.absent !== undefined) {
      child.kill();
      return hello.absent;
    }
    return new TorchPeer(child, lines, `torch ${hello.torch} on ${hello.device} (fp32 eager, TF32 off)`);
  }

  async ask(task: Record<string, unknown>): Promise<PeerAnswer> {
    this.child.stdin.write(`${JSON.stringify(task)}\n`);
    const line = await nextAnswer(this.lines);
    return line === null ? { absent: 'the peer ended' } : (JSON.parse(line) as PeerAnswer);
  }

  close(): void {
    this.child.stdin.end();
    this.child.kill();
  }
}
