/**
 * Live line charts with vega-lite (the project's plotting library, as in examples/plot.ts): one vega View per
 * chart, rendered as SVG into the page; points are streamed in with a changeset as records arrive.
 */
import { compile, type TopLevelSpec } from 'vega-lite';
import { changeset, parse, View } from 'vega';

export interface Point {
  readonly series: string;
  readonly x: number;
  readonly y: number;
}

/** A chart drawn on its first points (an empty vega view has no domain to draw axes with). */
export class LiveChart {
  private view: View | null = null;

  constructor(
    private readonly container: HTMLElement,
    private readonly spec: TopLevelSpec,
  ) {}

  static line(
    container: HTMLElement,
    title: string,
    xTitle: string,
    yTitle: string,
    yDomain?: [number, number],
  ): LiveChart {
    return new LiveChart(container, {
      $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
      title,
      width: 420,
      height: 220,
      data: { name: 'points' },
      mark: { type: 'line', point: true },
      encoding: {
        // Steps are integers: ticks between them stay unlabelled (vega 5 ignores tickMinStep with a computed
        // tick count).
        x: {
          field: 'x',
          type: 'quantitative',
          title: xTitle,
          axis: { labelExpr: "datum.value % 1 === 0 ? datum.label : ''" },
        },
        y: { field: 'y', type: 'quantitative', title: yTitle, ...(yDomain ? { scale: { domain: yDomain } } : {}) },
        color: { field: 'series', type: 'nominal', title: null, legend: { orient: 'bottom' } },
      },
    });
  }

  async add(points: readonly Point[]): Promise<void> {
    this.view ??= new View(parse(compile(this.spec).spec), { renderer: 'svg', container: this.container, hover: true });
    await this.view.change('points', changeset().insert(points.map((p) => ({ ...p })))).runAsync();
  }

  clear(): void {
    this.view?.finalize();
    this.view = null;
    this.container.replaceChildren();
  }
}
