import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/**
 * The import graph of `src/` and the checks spec/structure/imports.spec.ts runs on it: no module reaches itself
 * through its imports (a circle makes load order matter, and a class read before its module finished loading is
 * `undefined`); no layer imports one below it in ARCHITECTURE's Layers table (read from the table itself, so the
 * map and the code cannot drift apart); outside `src/backends/` only the registry and the package entry import
 * a backend. Every import counts, type-only ones too: a type in the wrong file is how a circle starts, and with
 * `verbatimModuleSyntax` off whether an import is erased depends on how each name is used. The CPU backend's
 * `assembly/` (AssemblyScript, compiled apart into one WebAssembly module) is not part of the graph.
 */
export const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return path.endsWith(join('cpu', 'assembly')) ? [] : sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/**
 * The `src/` modules a file imports: TypeScript's own pre-processor finds every specifier (static, side-effect,
 * re-export, type-only, dynamic), skipping comments and strings; shaders and packages are not modules of the graph.
 */
export function importsOf(file: string, text: string): string[] {
  const out = new Set<string>();
  for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
    if (!fileName.startsWith('.') || !/\.(js|ts)$/.test(fileName)) continue;
    out.add(relative(SRC, resolve(dirname(file), fileName.replace(/\.js$/, '.ts'))));
  }
  return [...out];
}

export type Graph = ReadonlyMap<string, readonly string[]>;

export function importGraph(): Graph {
  return new Map(sourceFiles(SRC).map((f) => [relative(SRC, f), importsOf(f, readFileSync(f, 'utf8'))]));
}

/** The strongly connected components with more than one module, or one importing itself (Tarjan). */
export function cycles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** One circle through the component's first module, as `a -> b -> a` (a shortest one, by breadth-first search). */
export function circleThrough(graph: Graph, scc: readonly string[]): string {
  const start = scc[0]!;
  const members = new Set(scc);
  const parent = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!members.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u = v; u !== start; u = parent.get(u)!) path.splice(1, 0, u);
        return [...path, start].join(' -> ');
      }
      if (!parent.has(w)) {
        parent.set(w, v);
        queue.push(w);
      }
    }
  }
  return scc.join(' -> ');
}

/** The `src/` paths of ARCHITECTURE's Layers table, lowest layer first (a row may name several, or none under `src/`). */
export function layersFromArchitecture(markdown: string): string[][] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith('Layers\n'));
  if (!section) throw new Error('docs/ARCHITECTURE.md has no "## Layers" section');
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((row) => [...row.split('|')[1]!.matchAll(/`src\/([^`]+)`/g)].map((m) => m[1]!.replace(/\/$/, '')));
}

/** The index of the table row a module belongs to: the row naming the longest path that contains it. */
export function layerOf(layers: readonly (readonly string[])[], module: string): number {
  let best = -1;
  let bestLength = -1;
  layers.forEach((paths, row) => {
    for (const p of paths)
      if ((module === p || module.startsWith(`${p}/`)) && p.length > bestLength) [best, bestLength] = [row, p.length];
  });
  return best;
}

/** Imports that break the layer rules, as `from -> to (why)`. */
export function layerViolations(graph: Graph, layers: readonly (readonly string[])[]): string[] {
  const out: string[] = [];
  const mayImportBackends = new Set(['backends/registry.ts', 'index.ts']);
  for (const [from, tos] of graph) {
    const own = layerOf(layers, from);
    if (own < 0) {
      out.push(`${from} (in no layer of the table)`);
      continue;
    }
    for (const to of tos) {
      const theirs = layerOf(layers, to);
      if (theirs > own)
        out.push(`${from} -> ${to} (${layers[theirs]!.join(', ')} is below ${layers[own]!.join(', ')})`);
      if (to.startsWith('backends/') && to !== 'backends/registry.ts')
        if (!from.startsWith('backends/') && !mayImportBackends.has(from))
          out.push(`${from} -> ${to} (a backend's code, outside the registry)`);
    }
  }
  return out;
}
