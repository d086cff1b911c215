import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { InterruptedError } from '../../src/training/interrupted.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { rejectionOf, tempDir } from './helpers/harness.js';

/**
 * A signal stops a run during its setup too (rendering and encoding every dataset row can take minutes), not
 * only between its steps: nothing is saved, and the exit says so.
 */

describe('a signal stops the setup of a run, not only its steps', () => {
  it('an abort while every dataset row is rendered stops within a second or two (exit 5 came 99-123 s later)', async () => {
    const dir = await tinyHubDir();
    const data = join(tempDir('setup-abort'), 'rows.jsonl');
    // About 4 s of rendering and encoding every row's prompt, on one thread, before the first step.
    const rows: string[] = [];
    for (let i = 0; i < 30_000; i++) rows.push(JSON.stringify({ prompt: `${i}+1?`, answer: String(i + 1) }));
    writeFileSync(data, `${rows.join('\n')}\n`);
    const cfg = parseTrainArgs([
      ...['--model', dir, '--dataset', data, '--steps', '1', '--prompts-per-step', '2', '--num-generations', '2'],
      ...['--max-completion-length', '24', '--eval-prompts', '2', '--eval-k', '1'],
    ]);
    if (E.isLeft(cfg)) throw cfg.left;
    const controller = new AbortController();
    const t0 = performance.now();
    setTimeout(() => controller.abort('SIGTERM'), 500);
    const e = await rejectionOf(train(cfg.right, { backend: new CpuBackend(), signal: controller.signal }));
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(e).toBeInstanceOf(InterruptedError);
    expect(e).toMatchObject({ phase: 'setup', checkpoint: null });
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.interrupted);
    expect(line).toBe('interrupted by SIGTERM before the first step: nothing saved (no --output)');
  }, 30_000);
});
