/** Line plots rendered to SVG with vega-lite (compiled to a vega spec, rendered headless in Node: no DOM). */
import { compile, type TopLevelSpec } from 'vega-lite';
import { parse, View } from 'vega';

export interface Series {
  readonly name: string;
  readonly points: readonly { readonly x: number; readonly y: number }[];
}

export async function lineChartSvg(
  title: string,
  xTitle: string,
  yTitle: string,
  series: readonly Series[],
): Promise<string> {
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
      // No label limit: vega's default (160 px) cut names with an ellipsis.
      color: { field: 'series', type: 'nominal', title: null, legend: { labelLimit: 0 } },
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

/** A mean with an interval (e.g. mean ± std over seeds), for `intervalChartSvg`. */
export interface IntervalPoint {
  /** Small multiples: one panel per distinct value (omit for a single panel). */
  readonly panel?: string;
  readonly series: string;
  readonly x: number | string;
  readonly mean: number;
  readonly lo: number;
  readonly hi: number;
}

export interface IntervalChartOptions {
  /** 'band' draws a shaded band (curves); 'bars' draws error bars with points (sweeps, comparisons). */
  readonly style: 'band' | 'bars';
  /** 'ordinal' places x values as categories in the order given (parameter values such as 0, 0.01, 0.1). */
  readonly xType: 'quantitative' | 'ordinal';
  readonly width?: number;
  readonly height?: number;
}

/** Lines of means with an interval around them, optionally as panels side by side (vega-lite, rendered to SVG). */
export async function intervalChartSvg(
  title: string,
  xTitle: string,
  yTitle: string,
  points: readonly IntervalPoint[],
  opts: IntervalChartOptions,
): Promise<string> {
  const values = points.map((p) => ({
    panel: p.panel ?? '',
    series: p.series,
    x: p.x,
    mean: p.mean,
    lo: p.lo,
    hi: p.hi,
  }));
  // Ordinal x: numbers in ascending order, strings in the order given.
  const allNumbers = values.every((v) => typeof v.x === 'number');
  const xOrder = [...new Set(values.map((v) => v.x))];
  const x =
    opts.xType === 'ordinal'
      ? {
          field: 'x',
          type: 'ordinal' as const,
          title: xTitle,
          sort: allNumbers ? ('ascending' as const) : xOrder.map(String),
        }
      : { field: 'x', type: 'quantitative' as const, title: xTitle };
  const color = { field: 'series', type: 'nominal' as const, title: null };
  const y = { field: 'mean', type: 'quantitative' as const, title: yTitle, scale: { zero: false } };
  const layer =
    opts.style === 'band'
      ? [
          {
            mark: { type: 'area' as const, opacity: 0.18 },
            encoding: {
              x,
              y: { field: 'lo', type: 'quantitative' as const, title: yTitle },
              y2: { field: 'hi' },
              color,
            },
          },
          { mark: { type: 'line' as const }, encoding: { x, y, color } },
        ]
      : [
          {
            mark: { type: 'rule' as const },
            encoding: {
              x,
              y: { field: 'lo', type: 'quantitative' as const, title: yTitle },
              y2: { field: 'hi' },
              color,
            },
          },
          { mark: { type: 'line' as const, point: true }, encoding: { x, y, color } },
        ];
  const inner = { width: opts.width ?? 260, height: opts.height ?? 220, layer };
  const panels = new Set(values.map((v) => v.panel));
  const spec = (
    panels.size > 1
      ? {
          $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
          title,
          data: { values },
          facet: { column: { field: 'panel', type: 'nominal', title: null, sort: [...panels] } },
          spec: inner,
          resolve: { scale: { x: 'independent' } },
        }
      : {
          $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
          title,
          data: { values },
          ...inner,
          width: opts.width ?? 560,
          height: opts.height ?? 300,
        }
  ) as TopLevelSpec;
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}
