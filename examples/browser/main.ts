/**
 * The training page: a form (task, objective with its TRL-named options, sizes), start/stop, a progress bar, live
 * curves (warm-start loss; RL reward and held-out pass@1) and the last step's completions with their verdicts.
 * Training runs in `worker.ts`. Any field can be preset from the URL (`?objective=grpo&steps=5&autostart=1`).
 * `globalThis.rlvrPage` exposes the run's state to scripts (the browser spec reads it).
 */
import {
  TASK_NAMES,
  TRAIN_DEFAULTS,
  objectives,
  type MetricRecord,
  type RolloutView,
  type TrainConfig,
} from '../../src/index.js';
import { LiveChart } from './charts.js';
import type { BackendChoice, FromWorker, StartMessage } from './protocol.js';

/** Trainer fields shown in the form, named as TRL's GRPOConfig names them where it has the setting. */
const FIELDS = [
  ['digits', 'digits'],
  ['warm_start_steps', 'warmStartSteps'],
  ['warm_start_until', 'warmStartUntil'],
  ['steps', 'steps'],
  ['prompts_per_step', 'promptsPerStep'],
  ['num_generations', 'numGenerations'],
  ['learning_rate', 'learningRate'],
  ['warmup_steps', 'warmupSteps'],
  ['temperature', 'temperature'],
  ['max_completion_length', 'maxCompletionLength'],
  ['num_iterations', 'numIterations'],
  ['eval_every', 'evalEvery'],
  ['eval_prompts', 'evalPrompts'],
  ['seed', 'seed'],
] as const satisfies readonly (readonly [string, keyof TrainConfig])[];

type Preset = Pick<
  TrainConfig,
  | 'model'
  | 'digits'
  | 'warmStartSteps'
  | 'warmStartUntil'
  | 'warmStartBatchSize'
  | 'steps'
  | 'promptsPerStep'
  | 'numGenerations'
  | 'evalPrompts'
  | 'evalK'
  | 'evalEvery'
> &
  Partial<Pick<TrainConfig, 'objective' | 'learningRate' | 'warmupSteps' | 'temperature'>>;

/**
 * `addition` (the default) is the library's defaults (TRAIN_DEFAULTS), the main job's regime (`npm run
 * example:addition`, `rlvr train` with no flags): 2+1-digit addition, a warm-start until greedy pass@1 on training
 * problems reaches 0.4, then 300 GRPO steps; in headless Chromium without a GPU the run takes under a minute.
 * `tiny` (1-digit operands) is a quick look at every part of the page.
 */
const d = TRAIN_DEFAULTS;
const PRESETS: Readonly<Record<'addition' | 'tiny', Preset>> = {
  addition: {
    model: d.model,
    digits: d.digits,
    warmStartSteps: d.warmStartSteps,
    warmStartUntil: d.warmStartUntil,
    warmStartBatchSize: d.warmStartBatchSize,
    steps: d.steps,
    promptsPerStep: d.promptsPerStep,
    numGenerations: d.numGenerations,
    evalPrompts: d.evalPrompts,
    evalK: d.evalK,
    evalEvery: d.evalEvery,
    objective: d.objective,
    learningRate: d.learningRate,
    warmupSteps: d.warmupSteps,
    temperature: d.temperature,
  },
  tiny: {
    model: { dModel: 32, nLayers: 1, nHeads: 2, nKvHeads: 2, dFf: 64, maxSeqLen: 32 },
    digits: 1,
    warmStartSteps: 150,
    warmStartUntil: null,
    warmStartBatchSize: 16,
    steps: 20,
    promptsPerStep: 4,
    numGenerations: 8,
    evalPrompts: 20,
    evalK: 2,
    evalEvery: 5,
    // Its own schedule (the defaults' 20 warmup steps would be all of its 20 steps).
    learningRate: 1e-4,
    warmupSteps: 5,
    temperature: 1,
  },
};

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const params = new URLSearchParams(location.search);
const snake = (camel: string): string => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function field(form: HTMLElement, name: string, control: HTMLInputElement | HTMLSelectElement): void {
  const label = document.createElement('label');
  label.append(name, control);
  control.name = name;
  form.append(label);
}

function select(form: HTMLElement, name: string, options: readonly string[], value: string): HTMLSelectElement {
  const s = document.createElement('select');
  for (const o of options) s.add(new Option(o, o));
  s.value = params.get(name) ?? value;
  field(form, name, s);
  return s;
}

function input(form: HTMLElement, name: string, value: string): HTMLInputElement {
  const i = document.createElement('input');
  i.value = params.get(name) ?? value;
  i.size = 8;
  field(form, name, i);
  return i;
}

// The form.
const configForm = $('config');
const task = select(configForm, 'task', TASK_NAMES, 'addition');
const objective = select(configForm, 'objective', objectives.OBJECTIVE_NAMES, TRAIN_DEFAULTS.objective);
const backendChoice = select(configForm, 'backend', ['auto', 'webgpu', 'cpu'], 'auto');
const preset = select(configForm, 'preset', Object.keys(PRESETS), 'addition');
const numbers = new Map(FIELDS.map(([name, key]) => [key, input(configForm, name, '')]));

function applyPreset(first: boolean): void {
  const p = PRESETS[preset.value as keyof typeof PRESETS];
  if (p.objective && !(first && params.get('objective'))) objective.value = p.objective;
  for (const [name, key] of FIELDS) {
    const value = String((p as Partial<Record<keyof TrainConfig, unknown>>)[key] ?? TRAIN_DEFAULTS[key] ?? '');
    numbers.get(key)!.value = (first && params.get(name)) || value;
  }
}
preset.onchange = () => {
  applyPreset(false);
  showObjectiveOptions(false);
};
applyPreset(true);

// The objective's options: every scalar of its defaults, under its TRL/verl snake_case name (the parser takes both),
// except those that repeat a trainer field above (num_generations, max_completion_length) and DAPO's nested
// overlong record.
const NOT_OPTIONS = new Set(['numGenerations', 'maxCompletionLength', 'overlong']);
const optionsForm = $('objective-options');
let optionInputs: { key: string; control: HTMLInputElement; initial: string }[] = [];
function showObjectiveOptions(first: boolean): void {
  optionsForm.replaceChildren();
  $('objective-legend').textContent = `${objective.value} options (defaults from the paper; TRL names)`;
  const defaults = objectives.OBJECTIVES[objective.value as objectives.ObjectiveName].defaults as unknown as Record<
    string,
    unknown
  >;
  optionInputs = Object.entries(defaults)
    .filter(([key, v]) => !NOT_OPTIONS.has(key) && (v === null || ['number', 'string', 'boolean'].includes(typeof v)))
    .map(([key, v]) => {
      const name = snake(key);
      const initial = v === null ? '' : String(v);
      const control = input(optionsForm, name, initial);
      if (!first) control.value = initial;
      return { key: name, control, initial };
    });
}
objective.onchange = () => showObjectiveOptions(false);
showObjectiveOptions(true);

/** The options the user changed, typed as their defaults are (the objective's parser validates them). */
function objectiveOptions(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, control, initial } of optionInputs) {
    const v = control.value.trim();
    if (v === initial) continue;
    out[key] = optionValue(v);
  }
  return out;
}

/** A field's text as the option's type: empty is null (off), then booleans, numbers, else the string. */
function optionValue(text: string): unknown {
  if (text === '') return null;
  if (text === 'true' || text === 'false') return text === 'true';
  return Number.isFinite(Number(text)) ? Number(text) : text;
}

function configFromForm(): Partial<TrainConfig> {
  const p = PRESETS[preset.value as keyof typeof PRESETS];
  const cfg: Record<string, unknown> = {
    ...p,
    task: task.value,
    objective: objective.value,
    objectiveOptions: objectiveOptions(),
  };
  // An empty field is null (digits: the task's default); digits may be a pair, `2,1`; parseTrainConfig names any
  // other bad value.
  for (const [key, control] of numbers) {
    const text = control.value.trim();
    cfg[key] = text === '' ? null : key === 'digits' && text.includes(',') ? text.split(',').map(Number) : Number(text);
  }
  return cfg as Partial<TrainConfig>;
}

// The run's display.
interface PageState {
  readonly records: MetricRecord[];
  rollouts: RolloutView | null;
  backend: string | null;
  status: 'idle' | 'running' | 'done' | 'stopped' | 'error';
  error: string | null;
}
const state: PageState = { records: [], rollouts: null, backend: null, status: 'idle', error: null };
(globalThis as { rlvrPage?: PageState }).rlvrPage = state;

const lossChart = LiveChart.line($('loss-chart'), 'Warm-start (supervised) loss', 'step', 'cross-entropy');
const rewardChart = LiveChart.line($('reward-chart'), 'RL: reward and held-out pass@1', 'RL step', 'fraction', [0, 1]);
const progress = $<HTMLProgressElement>('progress');
const status = $('status');
let worker: Worker | null = null;
let total = { warmstart: 0, rl: 0 };

function showRollouts(view: RolloutView): void {
  const rows = view.completions.slice(0, 12).map((completion, r) => {
    const tr = document.createElement('tr');
    const ok = view.rewards[r]! > 0.5;
    for (const [text, cls] of [
      [view.prompts[view.promptIndex[r]!]!, ''],
      [completion, ''],
      [`${ok ? '✓' : '✗'} reward ${view.rewards[r]!.toFixed(2)}`, ok ? 'ok' : 'bad'],
    ] as const) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    return tr;
  });
  $('completions')
    .querySelector('tbody')!
    .replaceChildren(...rows);
}

async function onMessage(m: FromWorker): Promise<void> {
  switch (m.type) {
    case 'backend':
      state.backend = `${m.name}: ${m.description}`;
      $('backend').textContent =
        `backend ${state.backend}${m.note ? ' (no hardware WebGPU here, so the CPU backend)' : ''}`;
      $('backend').title = m.note ?? '';
      return;
    case 'progress': {
      const done = m.phase === 'warmstart' ? m.step : total.warmstart + m.step;
      progress.value = done / Math.max(1, total.warmstart + total.rl);
      status.textContent = `${m.phase === 'warmstart' ? 'warm-start' : 'RL'} step ${m.step} / ${m.total}`;
      return;
    }
    case 'record': {
      const r = m.record;
      state.records.push(r);
      if (r.phase === 'warmstart') await lossChart.add([{ series: 'loss', x: r.step, y: Number(r.loss) }]);
      if (r.phase === 'rl') await rewardChart.add([{ series: 'mean reward', x: r.step, y: Number(r.reward) }]);
      // The warm-start's own checks (every 2 steps, on training problems) are not held-out evaluations.
      if (r.phase === 'eval' && r.label === 'warmstart-validation') return;
      if (r.phase === 'eval')
        await rewardChart.add([
          { series: 'pass@1 (greedy, held out)', x: r.at === 'rl' ? r.step : 0, y: Number(r.pass_at_1) },
        ]);
      if (r.phase === 'eval') status.textContent = `evaluated (${r.label}): pass@1 ${Number(r.pass_at_1).toFixed(3)}`;
      return;
    }
    case 'rollouts':
      state.rollouts = m.view;
      showRollouts(m.view);
      return;
    case 'done': {
      finish('done');
      progress.value = 1;
      const before = m.before === null ? 'n/a' : m.before.toFixed(3);
      const after = m.after.toFixed(3);
      status.textContent = `done in ${m.seconds.toFixed(0)} s: pass@1 after warm-start ${before}, after RL ${after}`;
      const link = $<HTMLAnchorElement>('download');
      link.href = URL.createObjectURL(new Blob([m.checkpoint], { type: 'application/octet-stream' }));
      link.hidden = false;
      return;
    }
    case 'error':
      state.error = m.message;
      $('error').textContent = m.message;
      finish('error');
  }
}

function finish(how: PageState['status']): void {
  worker?.terminate();
  worker = null;
  state.status = how;
  $<HTMLButtonElement>('start').disabled = false;
  $<HTMLButtonElement>('stop').disabled = true;
}

function start(): void {
  const config = configFromForm();
  total = { warmstart: config.warmStartSteps ?? 0, rl: config.steps ?? 0 };
  state.records.length = 0;
  state.rollouts = null;
  state.error = null;
  state.status = 'running';
  $('error').textContent = '';
  $<HTMLAnchorElement>('download').hidden = true;
  lossChart.clear();
  rewardChart.clear();
  progress.value = 0;
  status.textContent = 'starting';
  $<HTMLButtonElement>('start').disabled = true;
  $<HTMLButtonElement>('stop').disabled = false;
  // Messages are handled one at a time, in order (each may await a chart update).
  let queue = Promise.resolve();
  worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  worker.onmessage = (ev: MessageEvent<FromWorker>) => {
    queue = queue.then(() => onMessage(ev.data));
  };
  worker.onerror = (ev) => void onMessage({ type: 'error', message: ev.message || 'the worker failed to load' });
  const msg: StartMessage = { type: 'start', config, backend: backendChoice.value as BackendChoice };
  worker.postMessage(msg);
}

$('start').onclick = start;
$('stop').onclick = () => {
  finish('stopped');
  status.textContent += ' (stopped)';
};
if (params.get('autostart') === '1') start();
