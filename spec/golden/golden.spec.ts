/**
 * The golden vectors python/tests checks the Python package against (python/tests/golden) are what the objectives,
 * RCC and the verifier give now: a change to one side that is not made on the other fails here (TypeScript changed,
 * files not regenerated with `npm run export:golden`) or in python/tests (files regenerated, Python not changed).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CASES, goldenFiles } from '../../examples/golden/generate.js';
import { objectives as obj } from '../../src/index.js';

const DIR = join('python', 'tests', 'golden');

describe('the committed golden vectors', () => {
  const files = goldenFiles();

  it('cover every objective of the registry, RCC, the refused input and the verifier, with at least 200 cases each', () => {
    expect(Object.keys(files).sort()).toEqual(
      [...obj.OBJECTIVE_NAMES.map((n) => `${n}.json`), 'rcc.json', 'rejections.json', 'boxed.json'].sort(),
    );
    expect(CASES).toBeGreaterThanOrEqual(200);
    for (const [name, text] of Object.entries(files)) {
      const cases = (JSON.parse(text) as { cases: unknown[] }).cases;
      expect(cases.length, name).toBeGreaterThanOrEqual(name === 'boxed.json' ? 1000 : 200);
    }
  });

  it('equal what the exporter writes now (regenerate them with `npm run export:golden`)', () => {
    expect(readdirSync(DIR).sort()).toEqual(Object.keys(files).sort());
    for (const [name, text] of Object.entries(files)) {
      const committed = readFileSync(join(DIR, name), 'utf8');
      // One case per line: name the first that differs rather than printing megabytes.
      const a = committed.split('\n');
      const b = text.split('\n');
      const line = a.findIndex((l, i) => l !== b[i]);
      expect(line === -1 && a.length === b.length, `${name} differs at line ${line + 1}`).toBe(true);
    }
  });

  it('stay small enough to commit (a few MB in all)', () => {
    const bytes = Object.values(files).reduce((s, t) => s + Buffer.byteLength(t), 0);
    expect(bytes).toBeLessThan(4e6);
  });
});
