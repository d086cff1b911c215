import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * The README speaks of what a user of the project has. Every file or directory it points at (a
 * link, or a path in backticks) is part of the project, and nothing points outside it (`../...`).
 */
const README = readFileSync('README.md', 'utf8');
const tracked = new Set(execFileSync('git', ['ls-files'], { encoding: 'utf8' }).split('\n'));
const inProject = (path: string): boolean => {
  const p = path.replace(/^\.\//, '').replace(/\/$/, '').replace(/#.*$/, '');
  return tracked.has(p) || [...tracked].some((t) => t.startsWith(`${p}/`)) || (existsSync(p) && !p.startsWith('..'));
};

const topDirs = new Set([...tracked].filter((t) => t.includes('/')).map((t) => t.split('/')[0]!));

/**
 * Paths the README names: link targets, and words in backticks shaped like a path into the project (`./x`,
 * `../x`, a hidden directory `.x/...`, or one of the project's top-level directories; a Hub id such as
 * `Qwen/Qwen3-0.6B` is not one).
 */
function referencedPaths(text: string): string[] {
  const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((l) => !/^[a-z]+:/.test(l));
  // Fenced blocks first (their commands name paths too), then inline code in what is left.
  const fenced = [...text.matchAll(/```[^\n]*\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const prose = text.replace(/```[^\n]*\n[\s\S]*?```/g, '');
  const inline = [...prose.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const words = [...fenced, ...inline].flatMap((t) => t.split(/\s+/));
  const paths = words.filter(
    (w) => /^(\.{1,2}\/|\.[\w-]+\/)/.test(w) || (w.includes('/') && topDirs.has(w.split('/')[0]!)),
  );
  return [...new Set([...links, ...paths])].map((p) => p.replace(/[),.;:]+$/, '')).filter((p) => !p.includes('<')); // a pattern (docs/results/<scale>/...), not a path
}

describe('the README points only at what the project has', () => {
  it('finds the paths it checks (a sanity check of the extraction)', () => {
    expect(referencedPaths(README)).toEqual(expect.arrayContaining(['docs/RESULTS.md', 'docs/ARCHITECTURE.md']));
  });

  it('every path it names is in the project (it named .gpu/run.sh and ../shared/specs/gpu-device.md)', () => {
    const missing = referencedPaths(README).filter((p) => p.startsWith('../') || !inProject(p));
    expect(missing).toEqual([]);
  });
});
