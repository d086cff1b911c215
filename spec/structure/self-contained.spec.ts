import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/import-graph.js';

/**
 * The repository speaks of itself (issue 38): its sources and documents name no path outside it, since a clone has
 * none of them. The README, bench/RESULTS.md and bench comments named a session's GPU runner and its folder, a
 * packing tool and specs beside the checkout, and bench:gpu's PyTorch peer loaded its model from there.
 */
const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' });
const tracked = git('ls-files', '-z').split('\0').filter(Boolean);

/** Text the project writes: code, docs, configuration (recorded benchmark outputs are what a tool printed). */
const TEXT = /\.(ts|mts|mjs|js|md|py|toml|json|sh|html|wgsl|yml|yaml)$/;
const checked = tracked.filter((f) => TEXT.test(f) && f !== 'package-lock.json' && !f.startsWith('bench/results/'));

// Assembled from parts so that this file does not match itself.
const dot2 = '..';
const OUTSIDE: readonly RegExp[] = [
  new RegExp(`${dot2.replace(/\./g, '\\.')}/(\\.\\./)*shared\\b`), // the folder beside the checkout
  new RegExp(`(^|[^\\w/.-])shared/(${['specs', 'tools', 'papers', 'hooks'].join('|')})/`), // the same, written bare
  new RegExp(`(^|[\\s'"\`(=])/${'work'}/`), // the machine's work folder
  new RegExp(`${'gpu'}-pack`), // the session's packing tool
  new RegExp(`(^|[\\s'"\`(/])\\.${'gpu'}/`), // the folder that tool filled
];

/** Files that quote these paths as what the checks refuse. */
const QUOTING = new Set(['spec/robustness/readme.spec.ts']);

describe('the repository names no path outside itself', () => {
  it('checks the sources and documents (a sanity check of the file list)', () => {
    expect(checked).toEqual(expect.arrayContaining(['README.md', 'bench/RESULTS.md', 'bench/gpu.bench.ts']));
  });

  it('no tracked text names a path outside the repository', () => {
    const found: string[] = [];
    for (const file of checked) {
      if (QUOTING.has(file)) continue;
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (OUTSIDE.some((re) => re.test(line))) found.push(`${file}:${i + 1}: ${line.trim().slice(0, 100)}`);
        });
    }
    expect(found).toEqual([]);
  });

  it('the patterns catch what they are for', () => {
    for (const line of [
      `see ${dot2}/shared/specs/gpu-device.md`,
      `python3 ${dot2}/${dot2}/shared/tools/torch_reference_step.py`,
      `(see shared/${'specs'}/webgpu-in-node.md)`,
      `bash .${'gpu'}/run.sh npm run bench:gpu`,
      `bash ${dot2}/shared/tools/${'gpu'}-pack.sh`,
      `cat /${'work'}/briefs/x.md`,
    ])
      expect(
        OUTSIDE.some((re) => re.test(line)),
        line,
      ).toBe(true);
    for (const line of ['navigator.gpu.requestAdapter()', '/home/runner/work/node-webgpu/x.cpp', 'shared memory'])
      expect(
        OUTSIDE.some((re) => re.test(line)),
        line,
      ).toBe(false);
  });
});

describe('.gitignore covers what building the Python package writes', () => {
  // `pip install ./python` (setuptools) writes python/build/ and python/rlvr_objectives.egg-info/ beside the sources.
  it.each([
    'python/build/lib/rlvr_objectives/__init__.py',
    'python/build/bdist.linux-x86_64/wheel/x',
    'python/rlvr_objectives.egg-info/PKG-INFO',
  ])('%s is ignored', (path) => {
    expect(git('check-ignore', '--no-index', path).trim()).toBe(path);
  });
});
