import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  circleThrough,
  cycles,
  type Graph,
  importGraph,
  layerOf,
  layersFromArchitecture,
  layerViolations,
  ROOT,
} from '../helpers/import-graph.js';

describe('the cycle and layer checks', () => {
  it('find a planted circle and name it in import order', () => {
    const graph: Graph = new Map([
      ['a.ts', ['b.ts', 'x.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['x.ts', []],
      ['self.ts', ['self.ts']],
    ]);
    const found = cycles(graph);
    expect(found).toEqual([['a.ts', 'b.ts', 'c.ts'], ['self.ts']]);
    expect(circleThrough(graph, found[0]!)).toBe('a.ts -> b.ts -> c.ts -> a.ts');
    expect(cycles(new Map([...graph].filter(([k]) => k !== 'c.ts' && k !== 'self.ts')))).toEqual([]);
  });

  it('find an upward import and a backend imported from outside the registry', () => {
    const layers = [['core'], ['backends/cpu'], ['backends/registry.ts'], ['training'], ['index.ts']];
    const graph: Graph = new Map([
      ['core/tensor.ts', ['training/trainer.ts']],
      ['training/trainer.ts', ['backends/registry.ts', 'backends/cpu/index.ts', 'core/tensor.ts']],
      ['backends/registry.ts', ['backends/cpu/index.ts']],
      ['index.ts', ['backends/cpu/index.ts']],
      ['stray.ts', []],
    ]);
    expect(layerViolations(graph, layers)).toEqual([
      'core/tensor.ts -> training/trainer.ts (training is below core)',
      "training/trainer.ts -> backends/cpu/index.ts (a backend's code, outside the registry)",
      'stray.ts (in no layer of the table)',
    ]);
  });
});

describe('the import graph of src/', () => {
  const graph = importGraph();

  it('reads every module and its imports', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('core/tensor.ts')).toContain('core/dtype.ts');
  });

  it('has no circles', () => {
    const circles = cycles(graph).map((scc) => {
      const members = scc.length > 8 ? `${scc.slice(0, 8).join(', ')}, ...` : scc.join(', ');
      return `${circleThrough(graph, scc)} (one of the circles among ${scc.length} modules: ${members})`;
    });
    expect(circles).toEqual([]);
  });

  it("follows ARCHITECTURE's Layers table: no import from a layer below, backends only through the registry", () => {
    const layers = layersFromArchitecture(readFileSync(join(ROOT, 'docs/ARCHITECTURE.md'), 'utf8'));
    expect(layers.flat()).toEqual(expect.arrayContaining(['core', 'ops', 'nn', 'rl', 'tasks', 'training', 'cli']));
    expect(layerOf(layers, 'core/tensor.ts')).toBeLessThan(layerOf(layers, 'training/trainer.ts'));
    expect(layerViolations(graph, layers)).toEqual([]);
  });
});
