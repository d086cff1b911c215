import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import * as T from '../../src/index.js';
import { buildBrowserExample, buildForBrowser } from '../../esbuild.browser.mjs';
import { serveStatic, type Served } from '../../examples/browser/server.js';
import { ARTIFACTS, launchChromium } from './chromium.js';
import { expectClose } from '../helpers/compare.js';
import { CASES, runCase } from './kernel-cases.js';
import type { CpuPageResults, PageResults } from './kernel-page.js';

/**
 * The library in a real browser (headless Chromium, WebGPU on SwiftShader): (a) kernels and their vector-Jacobian
 * rules run in a page agree with the CPU backend in Node, on the same inputs and with spec/webgpu's tolerances;
 * (b) the training page of examples/browser trains a few steps of its smallest configuration in its worker, and
 * shows the curves and the completions; (c) screenshots of it and of the default preset's run are kept in
 * artifacts/browser/ (git-ignored; docs/browser-page.png is default-page.png).
 */
const browser = await launchChromium();
const OUT = join('dist', 'spec-browser');
// The oracle: the reference backend in Node.
const cpu = new T.ReferenceBackend();

/** Every case's outputs and vector-Jacobian products from the page against the reference backend's in Node. */
async function expectCasesAgree(results: PageResults['results']): Promise<void> {
  for (const c of CASES) {
    const got = results[c.name]!;
    const want = await runCase(c, cpu);
    if (c.forward) want.forward.forEach((w, i) => expectClose(`${c.name} output ${i}`, got.forward[i]!, w, c.forward!));
    want.vjp.forEach((w, i) => expectClose(`${c.name} ${i === 0 ? 'value' : `grad ${i - 1}`}`, got.vjp[i]!, w, c.grad));
  }
}

/** The page's run once it has ended: it must have ended without an error. */
async function finishedRun(page: Page, timeout: number): Promise<{ backend: string; records: T.MetricRecord[] }> {
  await page.waitForFunction('globalThis.rlvrPage && !["idle", "running"].includes(globalThis.rlvrPage.status)', null, {
    timeout,
    polling: 1000,
  });
  const state = (await page.evaluate('globalThis.rlvrPage')) as {
    status: string;
    error: string | null;
    backend: string;
    records: T.MetricRecord[];
  };
  expect(state.error).toBeNull();
  expect(state.status).toBe('done');
  return state;
}

describe.skipIf(browser === null)('headless Chromium', () => {
  let served: Served;
  let page: Page;
  let hasAdapter = false;

  beforeAll(async () => {
    await buildBrowserExample(join(OUT, 'example'));
    await buildForBrowser({ entryPoints: { kernels: 'spec/browser/kernel-page.ts' }, outdir: join(OUT, 'kernels') });
    writeFileSync(
      join(OUT, 'kernels', 'index.html'),
      '<!doctype html><link rel="icon" href="data:,"><script type="module" src="./kernels.js"></script>',
    );
    served = await serveStatic(OUT);
    page = await browser!.newPage({ viewport: { width: 1150, height: 900 } });
    await page.goto(`${served.url}kernels/`);
    await page.waitForFunction('typeof globalThis.runKernelCases === "function"');
    hasAdapter =
      (await page.evaluate('navigator.gpu ? navigator.gpu.requestAdapter().then((a) => a !== null) : false')) === true;
    if (!hasAdapter && process.env.CI)
      throw new Error(
        'browser specs: headless Chromium gave no WebGPU adapter ' +
          '(it needs --enable-unsafe-webgpu, and SwiftShader from chromium-common)',
      );
    if (!hasAdapter) console.log('browser specs: no WebGPU adapter in the page; the kernel checks are skipped');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await served?.close();
  });

  it('kernels and their vjp rules on WebGPU in the page agree with the CPU backend in Node', async (ctx) => {
    if (!hasAdapter) ctx.skip();
    const inPage = (await page.evaluate('globalThis.runKernelCases()')) as PageResults;
    expect(inPage.adapter).toMatch(/^navigator: /);
    expect(inPage.deviceError).toBeNull();
    await expectCasesAgree(inPage.results);
  }, 60_000);

  it('the CPU backend in the page: threads when cross-origin isolated, one thread otherwise; results agree', async () => {
    for (const [path, isolated] of [
      ['kernels/', true],
      ['plain/kernels/', false],
    ] as const) {
      const p = await browser!.newPage();
      await p.goto(`${served.url}${path}`);
      await p.waitForFunction('typeof globalThis.runCpuKernelCases === "function"');
      const inPage = (await p.evaluate('globalThis.runCpuKernelCases()')) as CpuPageResults;
      await p.close();
      expect(inPage.crossOriginIsolated).toBe(isolated);
      expect(inPage.threads).toBe(isolated ? 2 : 1);
      if (isolated) expect(inPage.parallelRuns).toBeGreaterThan(10);
      else expect(inPage.parallelRuns).toBe(0);
      // Chromium has relaxed SIMD: the page runs the fused multiply-add build.
      expect(inPage.describe).toMatch(/^cpu \(WebAssembly relaxed SIMD \(fused multiply-add\) kernels/);
      await expectCasesAgree(inPage.results);
    }
  }, 60_000);

  // Issue 21 item 3: the page's default run, as a visitor without a GPU starts it, shows RL working.
  for (const [where, prefix] of [
    ['one thread (a page that is not cross-origin isolated)', 'plain/'],
    ['threads (cross-origin isolated)', ''],
  ] as const) {
    it(`the default preset raises held-out pass@1 by at least 15 points, on the CPU backend with ${where}`, async () => {
      // The size of docs/browser-page.png, which is this run's screenshot (the cross-origin isolated one).
      const own = await browser!.newPage({ viewport: { width: 1150, height: 1060 } });
      try {
        const t0 = performance.now();
        await own.goto(`${served.url}${prefix}example/?autostart=1`);
        const state = await finishedRun(own, 400_000);
        const seconds = (performance.now() - t0) / 1000;
        // `auto` on a machine without a hardware adapter: the CPU backend (SwiftShader, if offered, is slower).
        expect(state.backend).toMatch(/^cpu: /);
        const evals = state.records.filter((r) => r.phase === 'eval' && r.label !== 'warmstart-validation');
        const before = Number(evals.find((r) => r.label === 'after-warmstart')!.pass_at_1);
        const after = Number(evals.find((r) => r.label === 'after-rl')!.pass_at_1);
        const rl = state.records.filter((r) => r.phase === 'rl');
        expect(rl).toHaveLength(300);
        console.log(
          `page default run (${where}): held-out pass@1 ${before.toFixed(3)} -> ${after.toFixed(3)} ` +
            `in ${seconds.toFixed(0)} s of wall time; backend ${state.backend}`,
        );
        expect(after - before).toBeGreaterThanOrEqual(0.15);
        mkdirSync(join(ARTIFACTS, 'browser'), { recursive: true });
        const shot = join(ARTIFACTS, 'browser', `default-page${prefix === '' ? '' : '-one-thread'}.png`);
        await own.screenshot({ path: shot, timeout: 20_000 });
        expect(statSync(shot).size).toBeGreaterThan(10_000);
      } finally {
        await own.close();
      }
    }, 420_000);
  }

  it('the training page trains a few steps in its worker: loss falls, curves and completions shown', async (ctx) => {
    if (!hasAdapter) ctx.skip();
    const query =
      'autostart=1&backend=webgpu&preset=tiny&objective=grpo&epsilon_high=0.28' +
      '&warm_start_steps=6&steps=2&prompts_per_step=2&num_generations=4&eval_prompts=4';
    await page.goto(`${served.url}example/?${query}`);
    const state = await finishedRun(page, 90_000);
    expect(state.backend).toMatch(/^webgpu: webgpu \(navigator: /);
    const losses = state.records.filter((r) => r.phase === 'warmstart').map((r) => Number(r.loss));
    expect(losses).toHaveLength(6);
    expect(losses.at(-1)!).toBeLessThan(losses[0]!);
    const rewards = state.records.filter((r) => r.phase === 'rl').map((r) => Number(r.reward));
    expect(rewards).toHaveLength(2);
    for (const r of rewards) expect(r >= 0 && r <= 1).toBe(true);
    // Every point is drawn: one symbol per warm-start step; RL rewards and the two pass@1 evaluations.
    expect(await page.locator('#loss-chart g.mark-symbol.role-mark path').count()).toBe(6);
    expect(await page.locator('#reward-chart g.mark-symbol.role-mark path').count()).toBe(2 + 2);
    const verdicts = await page.locator('#completions tbody tr td:nth-child(3)').allTextContents();
    expect(verdicts).toHaveLength(2 * 4);
    for (const v of verdicts) expect(v).toMatch(/^[✓✗] reward \d\.\d\d$/);
    await expect(page.locator('#download').isVisible()).resolves.toBe(true);

    mkdirSync(join(ARTIFACTS, 'browser'), { recursive: true });
    const shot = join(ARTIFACTS, 'browser', 'training-page.png');
    await page.screenshot({ path: shot, timeout: 20_000 });
    expect(statSync(shot).size).toBeGreaterThan(10_000);

    // Start again, then stop: the worker is terminated mid-run and the page can start anew.
    await page.click('#start');
    await page.waitForFunction('globalThis.rlvrPage.records.length > 0');
    await page.click('#stop');
    expect(await page.evaluate('globalThis.rlvrPage.status')).toBe('stopped');
    expect(await page.locator('#start').isEnabled()).toBe(true);
    expect(await page.locator('#status').textContent()).toMatch(/\(stopped\)$/);
  }, 120_000);
});
