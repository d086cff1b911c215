import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Runs the example with no training steps (the paths, not the learning, are under test) and its own TMPDIR;
 * asynchronously, so the test worker keeps answering vitest while it runs.
 */
function runExample(
  tmp: string,
  extra: string[] = [],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      join('node_modules', '.bin', 'vite-node'),
      ['--config', 'vitest.config.ts', 'examples/hf-qwen3.ts', '--steps', '0', '--warm-start-steps', '0', ...extra],
      { encoding: 'utf8', timeout: 240_000, maxBuffer: 16 << 20, env: { ...process.env, TMPDIR: tmp } },
      (error, stdout, stderr) =>
        done({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr }),
    );
  });
}

/**
 * `npm run example:hf` left 21 MB + 105 MB in temporary directories per run. It removes what it
 * made when it ends; a TMPDIR of its own shows what is left.
 */
describe('example:hf leaves no temporary directory', () => {
  it('the model and the run directories are gone after the example ends', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'rlvr-example-tmp-'));
    const r = await runExample(tmp);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/--output DIR keeps the base in DIR\/base/);
    expect(readdirSync(tmp).filter((e) => e.startsWith('qwen3-'))).toEqual([]);
  }, 240_000);

  // With --output X the LoRA run went to X-lora, beside X rather than in it: X alone did not hold both the adapter
  // and the base its adapter_config.json names.
  it('--output X keeps the adapter and the base model it names together under X', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'rlvr-example-tmp-'));
    const output = join(tmp, 'kept');
    const r = await runExample(tmp, ['--output', output]);
    expect(r.status, r.stderr).toBe(0);
    const adapterConfig = join(output, 'lora', 'adapter', 'adapter_config.json');
    expect(existsSync(adapterConfig)).toBe(true);
    const base = resolve(JSON.parse(readFileSync(adapterConfig, 'utf8')).base_model_name_or_path as string);
    expect(relative(resolve(output), base).startsWith('..')).toBe(false);
    for (const file of ['config.json', 'model.safetensors', 'tokenizer.json'])
      expect(existsSync(join(base, file))).toBe(true);
    expect(readdirSync(tmp).filter((e) => e.startsWith('qwen3-'))).toEqual([]);
    rmSync(tmp, { recursive: true, force: true });
  }, 240_000);
});
