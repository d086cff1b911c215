import cliProgress from 'cli-progress';
import type { MetricRecord } from '../training/metrics.js';

/**
 * Training progress on the terminal: a progress bar per phase with reward, pass rate and tokens/s when stdout is
 * a TTY (cli-progress), plain lines every `every` steps otherwise (logs, CI). Every evaluation says its step. The
 * warm-start's checks of `warmStartUntil` (every 2 steps) print at most every `every` steps, and the one that
 * reaches the target (on a TTY the bar shows the last one); 102 of a default run's 165 lines were those checks.
 */
export interface Progress {
  step(p: { phase: 'warmstart' | 'rl'; step: number; total: number; record: MetricRecord }): void;
  eval(record: MetricRecord): void;
  stop(): void;
}

const fmt = (x: unknown, digits = 3): string => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '-');

export function createProgress(opts: { tty?: boolean; every?: number; warmStartUntil?: number | null } = {}): Progress {
  const tty = opts.tty ?? Boolean(process.stdout.isTTY);
  const every = opts.every ?? 10;
  const target = opts.warmStartUntil ?? null;
  let check = '-';
  let bar: cliProgress.SingleBar | null = null;
  let barPhase: string | null = null;
  const stopBar = (): void => {
    bar?.stop();
    bar = null;
    barPhase = null;
  };
  return {
    step({ phase, step, total, record }) {
      const fields = {
        phase: phase === 'rl' ? 'RL        ' : 'warm-start',
        reward: fmt(record.reward),
        loss: fmt(record.loss, 4),
        tps: fmt(record.tokens_per_s, 0),
        check,
      };
      if (!tty) {
        // Step 1 too: a phase speaks from its first step, not after `every` of them.
        if (step === 1 || step % every === 0 || step === total) {
          console.log(
            `${phase} ${step}/${total} loss ${fields.loss}${phase === 'rl' ? ` reward ${fields.reward}` : ''} tokens/s ${fields.tps}`,
          );
        }
        return;
      }
      if (barPhase !== phase) {
        stopBar();
        bar = new cliProgress.SingleBar(
          {
            format:
              phase === 'rl'
                ? '{phase} [{bar}] {value}/{total} | loss {loss} | reward {reward} | {tps} tok/s | eta {eta}s'
                : '{phase} [{bar}] {value}/{total} | loss {loss} | training pass@1 {check} | {tps} tok/s | eta {eta}s',
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(total, step, fields);
        barPhase = phase;
      }
      bar?.update(step, fields);
    },
    eval(record) {
      if (record.label === 'warmstart-validation') {
        const reached = target !== null && Number(record.pass_at_1) >= target;
        check = fmt(record.pass_at_1);
        if (!reached && (tty || record.step % every !== 0)) return;
        stopBar();
        console.log(
          `warmstart ${record.step}: greedy pass@1 on training problems ${check}` +
            `${target === null ? '' : reached ? ` (reached ${target}: the warm-start ends)` : ` (until ${target})`}`,
        );
        return;
      }
      stopBar();
      const k = Object.keys(record).find((key) => key.startsWith('avg_at_'));
      const at = `${record.at === 'warmstart' ? 'warm-start' : 'RL'} step ${record.step}`;
      console.log(
        `eval (${record.label}, ${at}): held-out pass@1 ${fmt(record.pass_at_1)}${k ? `, ${k.replace(/_/g, '@').replace('avg@at@', 'avg@')} ${fmt(record[k])}` : ''}`,
      );
    },
    stop: stopBar,
  };
}

/**
 * Progress through the stages of a long command (a benchmark's rounds, an example's runs), so that none is silent
 * for minutes: on a TTY a bar with the stage and the time it has run; otherwise a line when a stage starts, one
 * when it ends (with its seconds) and, while one runs, a line every `heartbeatSeconds` saying it still does. The
 * heartbeat needs the event loop: run children asynchronously (`spawn`, not `spawnSync`).
 */
export interface Stages {
  start(name: string): void;
  done(detail?: string): void;
  stop(): void;
}

export function createStages(
  total: number,
  opts: { tty?: boolean; heartbeatSeconds?: number; log?: (line: string) => void } = {},
): Stages {
  const tty = opts.tty ?? Boolean(process.stdout.isTTY);
  const heartbeat = (opts.heartbeatSeconds ?? 30) * 1000;
  const log = opts.log ?? ((line: string) => console.log(line));
  let index = 0;
  let name = '';
  let began = 0;
  let timer: ReturnType<typeof setInterval> | null = null;
  let bar: cliProgress.SingleBar | null = null;
  const seconds = (): string => `${Math.round((performance.now() - began) / 1000)} s`;
  const clear = (): void => {
    if (timer) clearInterval(timer);
    timer = null;
  };
  return {
    start(stage) {
      clear();
      index += 1;
      name = stage;
      began = performance.now();
      if (tty) {
        bar ??= new cliProgress.SingleBar(
          { format: '[{bar}] {value}/{total} | {stage} | {duration_formatted}', hideCursor: true },
          cliProgress.Presets.shades_classic,
        );
        if (index === 1) bar.start(total, 0, { stage });
        else bar.update(index - 1, { stage });
        return;
      }
      log(`[${index}/${total}] ${stage} ...`);
      timer = setInterval(() => log(`[${index}/${total}] ${name}: running for ${seconds()}`), heartbeat);
      timer.unref();
    },
    done(detail) {
      clear();
      if (bar) bar.update(index, { stage: `${name}: done` });
      else log(`[${index}/${total}] ${name}: done in ${seconds()}${detail ? ` (${detail})` : ''}`);
    },
    stop() {
      clear();
      bar?.stop();
      bar = null;
    },
  };
}

/** A Markdown table: the header row, its rule (numbers right-aligned) and the rows. */
export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number'));
  return [
    `| ${header.join(' | ')} |`,
    `|${numeric.map((n) => (n ? '---:' : '---')).join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}
