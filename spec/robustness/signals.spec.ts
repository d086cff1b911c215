import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.js';
import { TRAIN_USAGE } from '../../src/cli/args.js';
import { loadCheckpoint } from '../../src/io/checkpoint.js';
import { InterruptedError } from '../../src/training/interrupted.js';
import { train } from '../../src/training/trainer.js';
import { cliBundle, rlvrChild, TINY_ARGS, withArgs } from './helpers/cli.js';
import { crashConfig, metricLines, task } from './helpers/crash-run.js';

/**
 * SIGTERM and SIGINT stop a run at the next step boundary, with its checkpoint written (even
 * between --checkpoint-every saves), one line saying so, and a documented exit status; the run resumes exactly.
 * A second signal stops at once (checkpoints are atomic, so the last one is kept).
 */
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-sig-${name}-`));
const cli = cliBundle('signals');
beforeAll(cli.build);
afterAll(cli.remove);

describe('signals stop a run cleanly', () => {
  it('the library: an aborted signal stops at the step boundary, saves, and the resumed run is exact', async () => {
    const full = tmp('full');
    await train({ ...crashConfig(full, null), checkpointEvery: 0 }, { task });
    const dir = tmp('cut');
    const controller = new AbortController();
    const e = await train(
      { ...crashConfig(dir, null), checkpointEvery: 0 },
      {
        task,
        signal: controller.signal,
        onRecord: (r) => {
          if (r.phase === 'rl' && r.step === 1) controller.abort('SIGTERM');
        },
      },
    ).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(InterruptedError);
    expect(e).toMatchObject({ phase: 'rl', step: 1, checkpoint: join(dir, 'checkpoint') });
    expect((e as Error).message).toMatch(/SIGTERM.*rl step 1.*checkpoint/);
    const ck = await loadCheckpoint(join(dir, 'checkpoint'))();
    if (E.isLeft(ck)) throw ck.left;
    expect(ck.right.trainerState).toMatchObject({ phase: 'rl', step: 1 });
    await train({ ...crashConfig(dir, join(dir, 'checkpoint')), checkpointEvery: 0 }, { task });
    expect(metricLines(dir)).toEqual(metricLines(full));
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} at the CLI: one line, exit ${EXIT.interrupted}, a checkpoint to resume (it died silently)`, async () => {
      const out = join(tmp(signal), 'run');
      const run = rlvrChild(cli.path, [
        'train',
        ...withArgs(TINY_ARGS, { '--warm-start-steps': '100000' }),
        '--output',
        out,
      ]);
      await run.waitFor(/^warmstart 10\//m);
      run.child.kill(signal);
      const r = await run.done;
      expect(r.signal).toBeNull();
      expect(r.code).toBe(EXIT.interrupted);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(`^rlvr: interrupted by ${signal} at warmstart step \\d+: checkpoint saved in .*--resume`),
      );
      const ck = await loadCheckpoint(join(out, 'checkpoint'))();
      if (E.isLeft(ck)) throw ck.left;
      expect(ck.right.trainerState).toMatchObject({ phase: 'warmstart' });
      const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n');
      expect(JSON.parse(metrics.at(-1)!).step).toBe((ck.right.trainerState as { step: number }).step);
    }, 60_000);
  }

  it('the interrupted status is documented in --help', () => {
    expect(TRAIN_USAGE).toMatch(new RegExp(`^  ${EXIT.interrupted}  interrupted`, 'm'));
  });
});
