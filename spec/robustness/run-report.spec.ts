import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { lineChartSvg, type LineChart } from '../../src/cli/line-chart.js';
import { createProgress } from '../../src/cli/progress.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { launchChromium } from '../browser/chromium.js';
import { cliBundle, rlvrChild, TINY_ARGS, withArgs } from './helpers/cli.js';

/**
 * Results people can see (issue 38): `rlvr train --output` wrote no curves.svg or summary.json (only the main job
 * did); the curves' legend was cut (`held-out pass@1 (g…`, vega's label limit) with a third of the width empty;
 * and 102 of the 165 lines `rlvr train` printed were `eval (warmstart-validation): pass@1 ...`, without a step.
 */
const cli = cliBundle('run-report');
const output = mkdtempSync(join(tmpdir(), 'rlvr-run-report-'));
// The warm-start runs all its 30 steps (a target it cannot reach: checked before steps 2, 4, ..., 28), then 4 RL
// steps with a held-out evaluation every 2.
const ARGS = withArgs(TINY_ARGS, {
  '--warm-start-steps': '30',
  '--warm-start-until': '0.99',
  '--steps': '4',
  '--eval-every': '2',
});
let run: { code: number | null; stdout: string; stderr: string };

beforeAll(async () => {
  await cli.build();
  run = await rlvrChild(cli.path, ['train', ...ARGS, '--output', output, '--threads', '1']).done;
}, 180_000);
afterAll(() => {
  cli.remove();
  rmSync(output, { recursive: true, force: true });
});

describe('rlvr train --output writes the curves and the summary', () => {
  it('curves.svg and summary.json, whose fields are the run', () => {
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(join(output, 'curves.svg'))).toBe(true);
    const summary = JSON.parse(readFileSync(join(output, 'summary.json'), 'utf8'));
    expect(summary.seed).toBe(0);
    expect(summary.config).toMatchObject({ objective: 'conspo', steps: 4, warmStartSteps: 30, warmStartUntil: 0.99 });
    expect(summary.warmStartStepsTaken).toBe(30);
    expect(summary.warmStartValidation.map((v: { step: number }) => v.step)).toEqual(
      Array.from({ length: 14 }, (_, i) => 2 * (i + 1)),
    );
    expect(summary.evaluations.map((e: { x: number }) => e.x)).toEqual([0, 2, 4]);
    expect(summary.rewards).toHaveLength(4);
    for (const r of summary.rewards) expect(r).toBeGreaterThanOrEqual(0);
    // The pass@1 figures are the ones the final line prints.
    const final = run.stdout.trim().split('\n').at(-1)!;
    const [, before, after] = /after warm-start (\d\.\d{3}), after RL (\d\.\d{3})/.exec(final)!;
    expect(summary.warmStartPassAt1.toFixed(3)).toBe(before);
    expect(summary.finalPassAt1.toFixed(3)).toBe(after);
    expect(summary.evaluations.at(-1).y).toBe(summary.finalPassAt1);
    expect(summary.backend).toMatch(/^cpu/);
    expect(typeof summary.wallSeconds).toBe('number');
    const svg = readFileSync(join(output, 'curves.svg'), 'utf8');
    expect(svg).toMatch(
      /^<svg[\s\S]*training reward \(10-step mean\)[\s\S]*held-out pass@1 \(greedy\)[\s\S]*<\/svg>\n$/,
    );
  });

  it('warm-start checks print with their step, at most every 10 steps; every evaluation says its step', () => {
    const lines = run.stdout.split('\n');
    expect(lines.filter((l) => l.includes('warmstart-validation'))).toEqual([]);
    const checks = lines.filter((l) => /greedy pass@1 on training problems/.test(l));
    expect(checks.map((l) => Number(/^warmstart (\d+):/.exec(l)?.[1]))).toEqual([10, 20]);
    const evals = lines.filter((l) => l.startsWith('eval ('));
    expect(evals).toHaveLength(3);
    for (const l of evals) expect(l).toMatch(/^eval \([\w-]+, (warm-start|RL) step \d+\): held-out pass@1 \d/);
  });
});

describe('warm-start checks in the progress lines', () => {
  const check = (step: number, passAt1: number): MetricRecord => ({
    phase: 'eval',
    step,
    label: 'warmstart-validation',
    at: 'warmstart',
    pass_at_1: passAt1,
  });

  it('plain lines: every 10th step and the one that reaches the target, each with its step', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const progress = createProgress({ tty: false, every: 10, warmStartUntil: 0.4 });
      // Checked every 2 steps, as the trainer does, until step 94 reaches 0.4.
      for (let step = 2; step <= 94; step += 2) progress.eval(check(step, step === 94 ? 0.41 : step / 1000));
      const lines = log.mock.calls.map((c) => String(c[0]));
      expect(lines.map((l) => Number(/^warmstart (\d+): /.exec(l)?.[1]))).toEqual([
        10, 20, 30, 40, 50, 60, 70, 80, 90, 94,
      ]);
      expect(lines.at(-1)).toMatch(/pass@1 on training problems 0\.410 \(reached 0\.4: the warm-start ends\)$/);
    } finally {
      log.mockRestore();
    }
  });
});

interface Measured {
  readonly width: number;
  readonly height: number;
  readonly texts: readonly { text: string; legend: boolean; corners: { x: number; y: number }[] }[];
}
/** Each text's box, its corners in the root's user units (the y axis' title is rotated), and the viewBox. */
const MEASURE_TEXTS = `(() => {
  const root = document.querySelector('svg');
  const box = root.viewBox.baseVal;
  const texts = [...root.querySelectorAll('text')].map((t) => {
    const b = t.getBBox();
    const m = t.getCTM();
    const corners = [[b.x, b.y], [b.x + b.width, b.y + b.height]].map(([x, y]) => ({
      x: m.a * x + m.c * y + m.e,
      y: m.b * x + m.d * y + m.f,
    }));
    return { text: t.textContent, legend: t.classList.contains('legend'), corners };
  });
  return { width: box.width, height: box.height, texts };
})()`;

describe('the curves chart fits its labels', () => {
  const chart: LineChart = {
    title: 'grpo on addition [2,1], seed 0',
    xTitle: 'RL step',
    yTitle: 'reward, pass@1',
    series: [
      { name: 'training reward (10-step mean)', points: [0, 1, 2, 3].map((x) => ({ x, y: 0.1 * x })) },
      {
        name: 'held-out pass@1 (greedy)',
        points: [
          { x: 0, y: 0.4 },
          { x: 3, y: 0.7 },
        ],
        dots: true,
      },
      // A label longer than the plot is wide: the chart widens rather than cut it.
      { name: `a much longer series name ${'W'.repeat(60)}`, points: [{ x: 1, y: 0.2 }] },
    ],
  };

  it('every text lies inside the viewBox in Chromium, and the legend says each name whole', async (ctx) => {
    const browser = await launchChromium();
    if (!browser) return ctx.skip();
    try {
      for (const svg of [lineChartSvg(chart), readFileSync(join(output, 'curves.svg'), 'utf8')]) {
        const page = await browser.newPage();
        await page.setContent(svg);
        // A string, run in the page (this file is type-checked without the DOM's types).
        const measured = (await page.evaluate(MEASURE_TEXTS)) as Measured;
        await page.close();
        const outside = measured.texts.filter((t) =>
          t.corners.some((c) => c.x < 0 || c.y < 0 || c.x > measured.width || c.y > measured.height),
        );
        expect(outside).toEqual([]);
        const names = measured.texts.filter((t) => t.legend).map((t) => t.text);
        expect(names.some((n) => n?.includes('…'))).toBe(false);
        if (svg.includes('much longer')) expect(names).toEqual(chart.series.map((s) => s.name));
        else expect(names).toEqual(['training reward (10-step mean)', 'held-out pass@1 (greedy)']);
      }
    } finally {
      await browser.close();
    }
  }, 120_000);
});
