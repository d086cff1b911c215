import { describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SCALES } from '../../examples/experiments/grid.js';
import { buildReport, NoResultsError } from '../../examples/experiments/report.js';

const RESULTS = join('docs', 'results', 'small');

/** docs/RESULTS.md is generated: the committed compact results must give it back exactly. */
describe('the committed report', () => {
  it('is rebuilt byte for byte from the committed per-run results (and its summary)', async () => {
    const docs = mkdtempSync(join(tmpdir(), 'rlvr-report-'));
    mkdirSync(join(docs, 'results'));
    copyFileSync(join('docs', 'results', 'reading.md'), join(docs, 'results', 'reading.md'));
    // The seeds the committed report was built with, as it states them.
    const committed = readFileSync(join('docs', 'RESULTS.md'), 'utf8');
    const seeds = /Seeds: ([\d, ]+) \(/.exec(committed)![1]!.split(', ').map(Number);
    await buildReport({ results: RESULTS, docs, settings: SCALES.small, seeds });
    expect(readFileSync(join(docs, 'RESULTS.md'), 'utf8')).toBe(readFileSync(join('docs', 'RESULTS.md'), 'utf8'));
    const summary = join('results', 'small', 'summary.json');
    expect(readFileSync(join(docs, summary), 'utf8')).toBe(readFileSync(join('docs', summary), 'utf8'));
  });

  it('refuses to write a report from zero results', async () => {
    const docs = mkdtempSync(join(tmpdir(), 'rlvr-report-empty-'));
    const build = buildReport({ results: join(docs, 'none'), docs, settings: SCALES.small, seeds: [0, 1, 2] });
    await expect(build).rejects.toThrow(NoResultsError);
    expect(existsSync(join(docs, 'RESULTS.md'))).toBe(false);
  });
});
