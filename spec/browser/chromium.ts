import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/**
 * Headless Chromium with WebGPU (SwiftShader where there is no GPU): Debian's binary, driven by playwright-core
 * (which downloads no browser). Without the binary the browser specs skip with one line, except under CI
 * (process.env.CI, set by .ci/run, which installs it), where they fail, as the WebGPU specs do without an adapter.
 */
export const CHROMIUM = process.env.RLVR_CHROMIUM ?? '/usr/lib/chromium/chromium';

/** --enable-unsafe-webgpu: without it navigator.gpu.requestAdapter() gives null in Chromium on Linux. */
export const CHROMIUM_ARGS = ['--headless=new', '--no-sandbox', '--enable-unsafe-webgpu'];

export async function launchChromium(): Promise<Browser | null> {
  if (!existsSync(CHROMIUM)) {
    const why = `no Chromium at ${CHROMIUM} (apt-get install chromium, or set RLVR_CHROMIUM)`;
    if (process.env.CI) throw new Error(`browser specs: ${why}`);
    console.log(`browser specs skipped: ${why}`);
    return null;
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/** Where screenshots go: a git-ignored folder kept as the run's artifact. */
export const ARTIFACTS = process.env.RLVR_ARTIFACTS ?? 'artifacts';
