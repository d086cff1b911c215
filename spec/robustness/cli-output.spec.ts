import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.js';
import { cliBundle, rlvrChild, TINY_ARGS, withArgs } from './helpers/cli.js';

/**
 * What the CLI prints, and where it goes: a closed stdout.
 */
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-cliout-${name}-`));
const cli = cliBundle('output');
beforeAll(cli.build);
afterAll(cli.remove);
const noStack = (text: string): void => expect(text).not.toMatch(/^\s+at /m);

describe('a closed stdout does not end training', () => {
  it('rlvr train | head -1: the run goes on to the end, exit 0, no EPIPE stack (it died before the first checkpoint)', async () => {
    const out = join(tmp('epipe'), 'run');
    const run = rlvrChild(cli.path, ['train', ...withArgs(TINY_ARGS, { '--warm-start-steps': '40' }), '--output', out]);
    await run.waitFor(/\n/);
    run.child.stdout!.destroy(); // what `head -1` does after its line
    const r = await run.done;
    noStack(r.stderr);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(EXIT.ok);
    const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(JSON.parse(metrics.at(-1)!)).toMatchObject({ phase: 'eval', label: 'after-rl' });
    expect(existsSync(join(out, 'checkpoint', 'model.safetensors'))).toBe(true);
  }, 60_000);
});
