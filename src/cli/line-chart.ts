/**
 * A line chart as a standalone SVG, for a run's curves (`curves.svg`). Written out by hand rather than through a
 * plotting library: the CLI draws two curves, and vega (which the examples' other charts use) would add about 27 MB
 * of dependencies to the package. Every text is placed by an upper bound of its width, so nothing is cut: the
 * legend sits under the plot, wrapping to more rows (never an ellipsis), and the chart widens for a label longer
 * than the plot.
 */

export interface ChartPoint {
  readonly x: number;
  readonly y: number;
}

export interface ChartSeries {
  readonly name: string;
  readonly points: readonly ChartPoint[];
  /** Mark each point with a dot (for sparse series such as evaluations). */
  readonly dots?: boolean;
}

export interface LineChart {
  readonly title: string;
  readonly xTitle: string;
  readonly yTitle: string;
  readonly series: readonly ChartSeries[];
}

/**
 * Advance widths, per 1000 em, of printable ASCII (space to '~'): for each character the largest of DejaVu Sans
 * and Liberation Sans (Arial's and Helvetica's metrics), regular and bold, as Chromium measured them. The widest
 * sans-serif fonts a viewer is likely to pick, so a width computed from these is an upper bound.
 */
const ASCII_WIDTHS = [
  349, 457, 521, 838, 696, 1002, 873, 307, 458, 458, 523, 838, 380, 416, 380, 366, 696, 696, 696, 696, 696, 696, 696,
  696, 696, 696, 400, 400, 838, 838, 838, 611, 1016, 774, 763, 734, 831, 684, 684, 821, 837, 373, 557, 775, 638, 996,
  837, 851, 733, 851, 771, 721, 683, 813, 774, 1104, 771, 725, 726, 458, 366, 458, 838, 557, 500, 675, 716, 593, 716,
  679, 436, 716, 712, 343, 343, 666, 343, 1042, 712, 688, 716, 716, 494, 596, 479, 712, 652, 924, 646, 652, 583, 712,
  366, 712, 838,
];
/** Any other character is counted as wide as the widest ASCII one. */
const OTHER_WIDTH = 1104;

/** An upper bound of `text`'s width in user units at `size` (the chart's font, regular or bold). */
export function textWidth(text: string, size: number): number {
  let em = 0;
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    em += code >= 32 && code < 127 ? ASCII_WIDTHS[code - 32]! : OTHER_WIDTH;
  }
  return (em / 1000) * size;
}

export const CHART_FONT = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif";
const COLORS = ['#4c78a8', '#f58518', '#54a24b', '#e45756', '#72b7b2', '#b279a2'];
const TITLE_SIZE = 14;
const LABEL_SIZE = 12;
const TICK_SIZE = 11;

const escapeXml = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const num = (x: number): string => String(Math.round(x * 100) / 100);

/** A round distance (1, 2 or 5 times a power of ten) that cuts [lo, hi] into about `count` parts. */
function niceStep(lo: number, hi: number, count: number): number {
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
}

/** About `count` round tick values (1, 2 or 5 times a power of ten apart) in [lo, hi]. */
export function niceTicks(lo: number, hi: number, count = 6): number[] {
  if (!(hi > lo)) return [lo];
  const step = niceStep(lo, hi, count);
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push(Math.round(t / step) * step);
  return ticks;
}
const tickLabel = (t: number): string => String(Number(t.toPrecision(6)));

/** The chart as an SVG document (its width and height are its viewBox's). */
export function lineChartSvg(chart: LineChart): string {
  const finite = chart.series.map((s) => s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)));
  const all = finite.flat();
  const xs = all.map((p) => p.x);
  const ys = all.map((p) => p.y);
  // Reductions, not spreads: a long run has more points than a call takes arguments.
  const least = (v: readonly number[], start: number): number => v.reduce((m, x) => Math.min(m, x), start);
  const most = (v: readonly number[], start: number): number => v.reduce((m, x) => Math.max(m, x), start);
  const xLo = least(xs, xs[0] ?? 0);
  const xHi = most(xs, xLo + 1);
  // The y axis starts at 0 (rewards and pass rates) and ends at the first round value at or above the data.
  const yLo = least(ys, 0);
  const yMax = ys.length ? most(ys, yLo + 0.1) : 1;
  const yStep = niceStep(yLo, yMax, 5);
  const yHi = Math.ceil(yMax / yStep - 1e-9) * yStep;
  const xTicks = niceTicks(xLo, xHi);
  const yTicks = niceTicks(yLo, yHi, 5);

  const yTickWidth = Math.max(...yTicks.map((t) => textWidth(tickLabel(t), TICK_SIZE)));
  const left = 8 + LABEL_SIZE + 8 + yTickWidth + 6;
  const top = 12 + TITLE_SIZE + 12;
  const plotHeight = 280;
  const legendEntries = chart.series.map((s) => ({ name: s.name, width: 22 + textWidth(s.name, LABEL_SIZE) }));
  // Wide enough for the plot, the title and the longest legend entry.
  const width = Math.ceil(
    Math.max(
      720,
      left + Math.max(...legendEntries.map((e) => e.width), 0) + 16,
      textWidth(chart.title, TITLE_SIZE) + 24,
    ),
  );
  const plotWidth = width - left - 16;
  const X = (x: number): number => left + ((x - xLo) / (xHi - xLo)) * plotWidth;
  const Y = (y: number): number => top + plotHeight - ((y - yLo) / (yHi - yLo || 1)) * plotHeight;

  // The legend under the x axis' title: entries left to right, a new row when the next does not fit.
  const legendTop = top + plotHeight + 6 + TICK_SIZE + 8 + LABEL_SIZE + 16;
  const rows: { name: string; x: number; row: number; color: string }[] = [];
  let x = left;
  let row = 0;
  legendEntries.forEach((e, i) => {
    if (x > left && x + e.width > left + plotWidth) {
      x = left;
      row += 1;
    }
    rows.push({ name: e.name, x, row, color: COLORS[i % COLORS.length]! });
    x += e.width + 24;
  });
  const height = Math.ceil(legendTop + (row + 1) * (LABEL_SIZE + 8) + 8);

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="${CHART_FONT}">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${num(width / 2)}" y="${12 + TITLE_SIZE}" font-size="${TITLE_SIZE}" font-weight="bold" text-anchor="middle">${escapeXml(chart.title)}</text>`,
  ];
  for (const t of yTicks) {
    out.push(
      `<line x1="${num(left)}" x2="${num(left + plotWidth)}" y1="${num(Y(t))}" y2="${num(Y(t))}" stroke="#e5e5e5"/>`,
      `<text x="${num(left - 6)}" y="${num(Y(t) + TICK_SIZE / 3)}" font-size="${TICK_SIZE}" text-anchor="end" fill="#444">${tickLabel(t)}</text>`,
    );
  }
  for (const t of xTicks) {
    out.push(
      `<line x1="${num(X(t))}" x2="${num(X(t))}" y1="${num(top + plotHeight)}" y2="${num(top + plotHeight + 4)}" stroke="#888"/>`,
      `<text x="${num(X(t))}" y="${num(top + plotHeight + 6 + TICK_SIZE)}" font-size="${TICK_SIZE}" text-anchor="middle" fill="#444">${tickLabel(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${num(left)}" y="${top}" width="${num(plotWidth)}" height="${plotHeight}" fill="none" stroke="#888"/>`,
    `<text x="${num(left + plotWidth / 2)}" y="${num(top + plotHeight + 6 + TICK_SIZE + 8 + LABEL_SIZE)}" font-size="${LABEL_SIZE}" font-weight="bold" text-anchor="middle">${escapeXml(chart.xTitle)}</text>`,
    `<text transform="translate(${8 + LABEL_SIZE},${num(top + plotHeight / 2)}) rotate(-90)" font-size="${LABEL_SIZE}" font-weight="bold" text-anchor="middle">${escapeXml(chart.yTitle)}</text>`,
  );
  finite.forEach((points, i) => {
    const color = COLORS[i % COLORS.length]!;
    if (points.length > 1) {
      const d = points.map((p, j) => `${j === 0 ? 'M' : 'L'}${num(X(p.x))},${num(Y(p.y))}`).join('');
      out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
    }
    if (chart.series[i]!.dots || points.length === 1)
      for (const p of points) out.push(`<circle cx="${num(X(p.x))}" cy="${num(Y(p.y))}" r="3" fill="${color}"/>`);
  });
  for (const e of rows) {
    const y = legendTop + e.row * (LABEL_SIZE + 8);
    out.push(
      `<line x1="${num(e.x)}" x2="${num(e.x + 16)}" y1="${num(y - LABEL_SIZE / 3)}" y2="${num(y - LABEL_SIZE / 3)}" stroke="${e.color}" stroke-width="3"/>`,
      `<text x="${num(e.x + 22)}" y="${num(y)}" font-size="${LABEL_SIZE}" class="legend">${escapeXml(e.name)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
