/** Line plots rendered to SVG with vega-lite (compiled to a vega spec, rendered headless in Node: no DOM). */
import { compile, type TopLevelSpec } from 'vega-lite';
import { parse, View } from 'vega';

export interface Series {
  readonly name: string;
  readonly points: readonly { readonly x: number; readonly y: number }[];
}

export async function lineChartSvg(title: string, xTitle: string, yTitle: string, series: readonly Series[]): Promise<string> {
  const values = series.flatMap((s) => s.points.map((p) => ({ series: s.name, x: p.x, y: p.y })));
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title,
    width: 560,
    height: 300,
    data: { values },
    mark: { type: 'line', point: false },
    encoding: {
      x: { field: 'x', type: 'quantitative', title: xTitle, axis: { format: 'd' } },
      y: { field: 'y', type: 'quantitative', title: yTitle },
      color: { field: 'series', type: 'nominal', title: null },
    },
  };
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

/** A trailing moving average, for noisy per-step rewards. */
export function smooth(points: readonly { x: number; y: number }[], window: number): { x: number; y: number }[] {
  return points.map((p, i) => {
    const part = points.slice(Math.max(0, i - window + 1), i + 1);
    return { x: p.x, y: part.reduce((s, q) => s + q.y, 0) / part.length };
  });
}
