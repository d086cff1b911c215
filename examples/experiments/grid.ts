/**
 * The experiment plan: which runs exist, with exactly which settings, and what each depends on. Everything the
 * report prints comes from runs listed here, with the settings of each scale (`SCALES`), so this file is the
 * whole protocol.
 *
 * - One warm-start per (task, seed), shared by every RL configuration of that task and seed: all methods start
 *   from the same policy with the same RL random stream (the RNG state saved in the warm-start checkpoint), so
 *   comparisons between methods are paired by seed.
 * - Every RL configuration has the same rollout budget: `steps` x `promptsPerStep` x `numGenerations` (the BICC
 *   group-size study changes G and prompts together so that their product stays fixed).
 */
import type { BiccRatio, BiccSides, ModelSize, TaskName, TrainConfig } from '../../src/index.js';

export type Scale = 'small' | 'large' | 'tiny';
export type GridName = 'pilot' | 'objectives' | 'ablations' | 'sweep' | 'groups' | 'variance' | 'context';
/**
 * The grids, in the order the runner takes them. `pilot` is the power analysis's pilot: the runs whose spread sets
 * the number of seeds, on seeds of their own (`ScaleSettings.pilotSeeds`), never the report's.
 */
export const GRID_NAMES: readonly GridName[] = [
  'pilot',
  'objectives',
  'ablations',
  'sweep',
  'groups',
  'variance',
  'context',
];

/** A task of the study: the trainer's task name, its operand digits and its warm-start. */
export interface TaskSpec {
  /** Id used in paths and tables. */
  readonly id: string;
  readonly label: string;
  readonly task: TaskName;
  /** Digits of both operands, or of the first and the second. */
  readonly digits: number | readonly [number, number] | null;
  /** The warm-start's length, or its ceiling with `warmStartUntil`. */
  readonly warmStartSteps: number;
  /** End the warm-start once greedy pass@1 on training problems reaches this (TrainConfig.warmStartUntil). */
  readonly warmStartUntil: number | null;
  /** Share of warm-start examples with BICC's context before the query (TrainConfig.warmStartContextShare; 0). */
  readonly warmStartContextShare?: number;
}

/** Settings shared by every run of a scale (recorded verbatim in each result file). */
export interface ScaleSettings {
  readonly scale: Scale;
  readonly model: ModelSize;
  readonly tasks: readonly TaskSpec[];
  /** The task the ablations, the sweep and the group-size study run on. */
  readonly studyTask: string;
  /**
   * The study task with a context-reading warm-start (issue 29): the regime of the `context` grid, where BICC's
   * claims are put to a policy that has learned to read its inserted context (null: no such grid at this scale).
   */
  readonly contextTask: TaskSpec | null;
  readonly warmStartBatchSize: number;
  readonly warmStartLearningRate: number;
  readonly steps: number;
  readonly promptsPerStep: number;
  readonly numGenerations: number;
  readonly groupsPerMinibatch: number;
  readonly numIterations: number;
  readonly learningRate: number;
  readonly warmupSteps: number;
  readonly temperature: number;
  readonly maxCompletionLength: number;
  readonly evalPrompts: number;
  readonly evalK: number;
  /** Group sizes of the BICC study (prompts per step = promptsPerStep * numGenerations / G). */
  readonly groupSizes: readonly number[];
  /** Sweep values (Figure 2). */
  readonly tau: readonly number[];
  readonly margin: readonly number[];
  readonly alpha: readonly number[];
  /** RL steps of GRPO after which the gradient variance is measured (0: the warm-started policy). */
  readonly variancePoints: readonly number[];
  /** Prompts of the batch sampled at each variance point, and groups per minibatch. */
  readonly variancePrompts: number;
  readonly varianceGroupsPerMinibatch: number;
  /** Seeds of the power analysis's pilot runs (disjoint from the report's seeds). */
  readonly pilotSeeds: readonly number[];
  /** Seeds the power analysis asks for (the report says how many of them have run). */
  readonly plannedSeeds: number;
  /** How the RL settings were chosen (printed in the protocol). */
  readonly tuning: string;
}

/**
 * Seeds of the small grid, from its power analysis (RESULTS.md, "Power"): the pilot's spread of the paired
 * ConSPO − GRPO pass@1 difference (sd 2.7 points over seeds 100-107) asks for 5 seeds to detect Table 1's 4-point gap
 * with 80% power at 5%; twice that, as an 8-seed pilot's std may be low by a third.
 */
const PLANNED_SEEDS_SMALL = 10;

export const SCALES: { readonly [S in Scale]: ScaleSettings } = {
  /** A smoke test of the whole pipeline (a minute or two); its numbers mean nothing. */
  tiny: {
    scale: 'tiny',
    model: { dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, dFf: 32, maxSeqLen: 40 },
    tasks: [
      {
        id: 'add2',
        label: 'addition 2+2 digits',
        task: 'addition',
        digits: 2,
        warmStartSteps: 20,
        warmStartUntil: null,
      },
      {
        id: 'mul2',
        label: 'multiplication 2x1 digits',
        task: 'multiplication',
        digits: 2,
        warmStartSteps: 20,
        warmStartUntil: null,
      },
    ],
    studyTask: 'add2',
    contextTask: {
      id: 'add2ctx',
      label: 'addition 2+2 digits, context-reading warm-start',
      task: 'addition',
      digits: 2,
      warmStartSteps: 20,
      warmStartUntil: null,
      warmStartContextShare: 0.5,
    },
    warmStartBatchSize: 16,
    warmStartLearningRate: 3e-3,
    steps: 2,
    promptsPerStep: 4,
    numGenerations: 4,
    groupsPerMinibatch: 2,
    numIterations: 1,
    learningRate: 1e-4,
    warmupSteps: 1,
    temperature: 1,
    maxCompletionLength: 8,
    evalPrompts: 8,
    evalK: 2,
    groupSizes: [2],
    tau: [1, 10],
    margin: [0, 0.01],
    alpha: [0.3, 1],
    variancePoints: [0, 2],
    variancePrompts: 8,
    varianceGroupsPerMinibatch: 2,
    pilotSeeds: [100, 101],
    plannedSeeds: 2,
    tuning: 'A smoke test: nothing was tuned.',
  },
  /**
   * The learning regime of issue 21: a warm-start until greedy pass@1 on training problems reaches 0.4, then RL at
   * the main job's settings (docs/results/addition-regime/README.md), on 3+1-digit addition: 9,000 problems, so the
   * held-out split (about 900) is large enough to evaluate 500 draws of mostly distinct prompts.
   */
  small: {
    scale: 'small',
    model: { dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 4, dFf: 192, maxSeqLen: 48 },
    tasks: [
      {
        id: 'add31',
        label: 'addition 3+1 digits',
        task: 'addition',
        digits: [3, 1],
        warmStartSteps: 1000,
        warmStartUntil: 0.4,
      },
    ],
    studyTask: 'add31',
    // The same task and stopping rule; half of the warm-start's examples carry BICC's context (a pilot on seed 0:
    // 0.26 nats per token at the first BICC step against 2.98 with the plain warm-start).
    contextTask: {
      id: 'add31ctx',
      label: 'addition 3+1 digits, context-reading warm-start',
      task: 'addition',
      digits: [3, 1],
      warmStartSteps: 1000,
      warmStartUntil: 0.4,
      warmStartContextShare: 0.5,
    },
    warmStartBatchSize: 64,
    warmStartLearningRate: 3e-3,
    steps: 300,
    promptsPerStep: 16,
    numGenerations: 8,
    groupsPerMinibatch: 8,
    numIterations: 1,
    learningRate: 5e-4,
    warmupSteps: 20,
    temperature: 0.7,
    maxCompletionLength: 8,
    evalPrompts: 500,
    evalK: 8,
    groupSizes: [4, 16],
    tau: [0.1, 1, 10, 100],
    margin: [0, 0.01, 0.1, 1],
    alpha: [0.1, 0.3, 0.6, 1],
    variancePoints: [0, 150, 300],
    variancePrompts: 128,
    varianceGroupsPerMinibatch: 4,
    pilotSeeds: [100, 101, 102, 103, 104, 105, 106, 107],
    plannedSeeds: PLANNED_SEEDS_SMALL,
    tuning:
      "They are the main job's (`npm run example:addition`), chosen by the search in `docs/results/addition-regime/` " +
      'for GRPO on 2+1-digit addition (learning rate 5e-4 with a 20-update warmup and temperature 0.7 raised held-out ' +
      'pass@1 in every seed; 1e-3 first lost 15 points, temperature 0.5 collapsed), with two updates per step so that ' +
      "the objectives' ratio terms act (with one, every ratio is 1 and GMPO is GRPO). Pilots before the grid, in that " +
      'folder: two updates per step on 2+1 digits, GRPO and ConSPO, seeds 0-3 (`m8-*`): +32 to +64 points; GRPO on ' +
      '3+1 digits, seeds 0-3 (`a31-*`): +14 to +34. The same settings for every configuration.',
  },
  large: {
    scale: 'large',
    model: { dModel: 128, nLayers: 4, nHeads: 4, nKvHeads: 2, dFf: 384, maxSeqLen: 48 },
    tasks: [
      {
        id: 'add3',
        label: 'addition 3+3 digits',
        task: 'addition',
        digits: 3,
        warmStartSteps: 2000,
        warmStartUntil: null,
      },
      {
        id: 'mul3',
        label: 'multiplication 3x1 digits',
        task: 'multiplication',
        digits: 3,
        warmStartSteps: 2000,
        warmStartUntil: null,
      },
    ],
    studyTask: 'mul3',
    contextTask: null,
    warmStartBatchSize: 128,
    warmStartLearningRate: 2e-3,
    steps: 200,
    promptsPerStep: 32,
    numGenerations: 8,
    groupsPerMinibatch: 8,
    numIterations: 1,
    learningRate: 1e-4,
    warmupSteps: 10,
    temperature: 1,
    maxCompletionLength: 10,
    evalPrompts: 500,
    evalK: 16,
    groupSizes: [2, 4, 16],
    tau: [0.1, 1, 10, 100],
    margin: [0, 0.01, 0.1, 1],
    alpha: [0.1, 0.3, 0.6, 1],
    variancePoints: [0, 50, 100, 200],
    variancePrompts: 256,
    varianceGroupsPerMinibatch: 8,
    pilotSeeds: [100, 101, 102, 103],
    plannedSeeds: 3,
    tuning: "Not run yet: the small scale's settings, scaled.",
  },
};

/** One RL configuration: how it differs from the scale's settings. */
export interface Method {
  /** Id used in paths. */
  readonly id: string;
  /** Name printed in tables. */
  readonly label: string;
  readonly objective: TrainConfig['objective'];
  readonly objectiveOptions: Readonly<Record<string, string | number | boolean>>;
  readonly advantage: 'group' | 'rcc';
  readonly bicc: boolean;
  /** Group size, when it differs from the scale's (the BICC group-size study). */
  readonly numGenerations?: number;
  /** RL steps, when they differ from the scale's (GRPO policies for the variance points). */
  readonly steps?: number;
  /** BICC's reading of the ratio, when it is not the paper's (`conditioned-policy`). */
  readonly biccRatio?: BiccRatio;
  /** The rows BICC conditions, when not both classes (the unilateral ablations). */
  readonly biccSides?: BiccSides;
}

const m = (id: string, label: string, objective: Method['objective'], extra: Partial<Method> = {}): Method => ({
  id,
  label,
  objective,
  objectiveOptions: {},
  advantage: 'group',
  bicc: false,
  ...extra,
});

/** Table 1's methods, and BICC / RCC on top of GRPO and ConSPO (RCC changes advantages, which ConSPO has none of). */
export const OBJECTIVE_METHODS: readonly Method[] = [
  m('grpo', 'GRPO', 'grpo'),
  m('dapo', 'DAPO', 'dapo'),
  m('dr_grpo', 'Dr. GRPO', 'dr_grpo'),
  m('disco', 'DisCO', 'disco'),
  m('gmpo', 'GMPO', 'gmpo'),
  m('cispo', 'CISPO', 'cispo'),
  m('sapo', 'SAPO', 'sapo'),
  m('conspo', 'ConSPO', 'conspo'),
  m('grpo+rcc', 'GRPO + RCC', 'grpo', { advantage: 'rcc' }),
  m('grpo+bicc', 'GRPO + BICC', 'grpo', { bicc: true }),
  m('grpo+bicc+rcc', 'GRPO + BICC + RCC', 'grpo', { bicc: true, advantage: 'rcc' }),
  m('conspo+bicc', 'ConSPO + BICC', 'conspo', { bicc: true }),
];

/**
 * The `context` grid's methods (issue 29), on the context-reading warm-start: GRPO and ConSPO, each with BICC as the
 * paper states its ratio and as the authors' code sets out to compute it.
 */
export const CONTEXT_METHODS: readonly Method[] = [
  OBJECTIVE_METHODS.find((x) => x.id === 'grpo')!,
  OBJECTIVE_METHODS.find((x) => x.id === 'grpo+bicc')!,
  m('grpo+bicc-old', 'GRPO + BICC (conditioned π_old)', 'grpo', { bicc: true, biccRatio: 'conditioned-old' }),
  OBJECTIVE_METHODS.find((x) => x.id === 'conspo')!,
  OBJECTIVE_METHODS.find((x) => x.id === 'conspo+bicc')!,
  m('conspo+bicc-old', 'ConSPO + BICC (conditioned π_old)', 'conspo', { bicc: true, biccRatio: 'conditioned-old' }),
  // Unilateral ablations: which side of BICC costs the plain policy.
  m('grpo+bicc-pos', 'GRPO + BICC on positives only', 'grpo', { bicc: true, biccSides: 'positives' }),
  m('grpo+bicc-neg', 'GRPO + BICC on negatives only', 'grpo', { bicc: true, biccSides: 'negatives' }),
];

/** The pilot's methods: the comparisons of the claims whose power the pilot estimates (with RCC's variance). */
export const PILOT_METHODS: readonly string[] = ['grpo', 'conspo', 'grpo+rcc', 'grpo+bicc'];

/** Table 6's variants (ConSPO itself is the objectives grid's run). */
export const ABLATION_METHODS: readonly Method[] = [
  m('conspo-linear', 'w/o contrastive objective', 'conspo', { objectiveOptions: { contrast: 'linear' } }),
  m('conspo-clipped', 'w/o log-likelihood scores', 'conspo', { objectiveOptions: { score: 'clipped-ratio' } }),
  m('conspo-nomargin', 'w/o scheduled margin', 'conspo', { objectiveOptions: { marginSchedule: 'none' } }),
  m('conspo-fixedmargin', 'w/ fixed margin', 'conspo', { objectiveOptions: { marginSchedule: 'fixed' } }),
];

/** ConSPO's paper defaults; a sweep point equal to them is the objectives grid's ConSPO run. */
export const CONSPO_PAPER = { tau: 10, margin: 0.01, alpha: 0.3 } as const;
export type SweepParam = keyof typeof CONSPO_PAPER;

/** The method of a sweep point: one parameter changed, the others at the paper's values. */
export function sweepMethod(param: SweepParam, value: number): Method {
  if (value === CONSPO_PAPER[param]) return OBJECTIVE_METHODS.find((x) => x.id === 'conspo')!;
  // M = 0 under the cosine schedule is m_t = 0 throughout: the same computation as "w/o scheduled margin".
  if (param === 'margin' && value === 0) return ABLATION_METHODS.find((x) => x.id === 'conspo-nomargin')!;
  return m(`conspo-${param}=${value}`, `ConSPO ${param}=${value}`, 'conspo', { objectiveOptions: { [param]: value } });
}

export function groupSizeMethods(g: number): Method[] {
  return [
    m(`grpo-G${g}`, `GRPO G=${g}`, 'grpo', { numGenerations: g }),
    m(`grpo+bicc-G${g}`, `GRPO + BICC G=${g}`, 'grpo', { bicc: true, numGenerations: g }),
  ];
}

export function varianceTrainingMethod(steps: number, s: ScaleSettings): Method {
  return steps === s.steps
    ? OBJECTIVE_METHODS[0]!
    : m(`grpo-steps${steps}`, `GRPO (${steps} steps)`, 'grpo', { steps });
}

// ---------------------------------------------------------------------------------------------------------------
// Jobs.

export interface WarmStartJob {
  readonly kind: 'warmstart';
  readonly id: string;
  readonly task: TaskSpec;
  readonly seed: number;
  readonly deps: readonly string[];
}

export interface RlJob {
  readonly kind: 'rl';
  readonly id: string;
  readonly task: TaskSpec;
  readonly seed: number;
  readonly method: Method;
  readonly deps: readonly string[];
}

export interface VarianceJob {
  readonly kind: 'variance';
  readonly id: string;
  readonly task: TaskSpec;
  readonly seed: number;
  /** GRPO RL steps before the measurement. */
  readonly point: number;
  /** The RL run whose final policy is measured (null: the warm-started policy). */
  readonly policyRun: string | null;
  readonly deps: readonly string[];
}

export type Job = WarmStartJob | RlJob | VarianceJob;

export const warmStartId = (task: TaskSpec, seed: number): string => `warmstart/${task.id}/seed${seed}`;
export const rlId = (task: TaskSpec, method: Method, seed: number): string => `rl/${task.id}/${method.id}/seed${seed}`;
export const varianceId = (task: TaskSpec, point: number, seed: number): string =>
  `variance/${task.id}/step${point}/seed${seed}`;

/** The rollout budget of a method: prompts per step follow G so that prompts x G stays the scale's. */
export function promptsFor(method: Method, s: ScaleSettings): number {
  const g = method.numGenerations ?? s.numGenerations;
  const prompts = (s.promptsPerStep * s.numGenerations) / g;
  if (!Number.isInteger(prompts))
    throw new Error(`group size ${g} does not divide the rollout budget ${s.promptsPerStep * s.numGenerations}`);
  return prompts;
}

/** The full training config of an RL run (everything explicit: nothing depends on the trainer's defaults). */
export function rlConfig(
  s: ScaleSettings,
  task: TaskSpec,
  method: Method,
  seed: number,
  dirs: { resume: string; output: string },
): Partial<TrainConfig> {
  const g = method.numGenerations ?? s.numGenerations;
  const prompts = promptsFor(method, s);
  return {
    ...commonConfig(s, task, seed),
    objective: method.objective,
    objectiveOptions: { ...method.objectiveOptions },
    advantage: method.advantage,
    rccDelta: 'sum',
    bicc: method.bicc,
    biccContextShare: 0.4,
    ...(method.biccRatio ? { biccRatio: method.biccRatio } : {}),
    ...(method.biccSides ? { biccSides: method.biccSides } : {}),
    steps: method.steps ?? s.steps,
    promptsPerStep: prompts,
    numGenerations: g,
    // Minibatches hold the same number of rollouts whatever G is.
    groupsPerMinibatch: Math.max(1, Math.round((s.groupsPerMinibatch * s.numGenerations) / g)),
    resume: dirs.resume,
    outputDir: dirs.output,
  };
}

export function warmStartConfig(s: ScaleSettings, task: TaskSpec, seed: number, output: string): Partial<TrainConfig> {
  return { ...commonConfig(s, task, seed), steps: 0, outputDir: output };
}

function commonConfig(s: ScaleSettings, task: TaskSpec, seed: number): Partial<TrainConfig> {
  return {
    task: task.task,
    digits: task.digits,
    seed,
    backend: 'cpu',
    // One thread per job: the runner runs `--jobs` processes at once, and results do not depend on the count.
    threads: 1,
    model: s.model,
    warmStartSteps: task.warmStartSteps,
    warmStartUntil: task.warmStartUntil,
    ...(task.warmStartContextShare ? { warmStartContextShare: task.warmStartContextShare } : {}),
    warmStartBatchSize: s.warmStartBatchSize,
    warmStartLearningRate: s.warmStartLearningRate,
    promptsPerStep: s.promptsPerStep,
    numGenerations: s.numGenerations,
    temperature: s.temperature,
    topP: 1,
    maxCompletionLength: s.maxCompletionLength,
    learningRate: s.learningRate,
    numIterations: s.numIterations,
    groupsPerMinibatch: s.groupsPerMinibatch,
    warmupSteps: s.warmupSteps,
    maxGradNorm: 1,
    weightDecay: 0,
    evalEvery: 0,
    evalPrompts: s.evalPrompts,
    evalK: s.evalK,
    checkpointEvery: 0,
  };
}

/** Every job of the chosen grids and seeds, in dependency order, without duplicates. */
export function plan(s: ScaleSettings, grids: readonly GridName[], seeds: readonly number[]): Job[] {
  const jobs = new Map<string, Job>();
  const add = (job: Job): void => {
    if (!jobs.has(job.id)) jobs.set(job.id, job);
  };
  const warm = (task: TaskSpec, seed: number): string => {
    const id = warmStartId(task, seed);
    add({ kind: 'warmstart', id, task, seed, deps: [] });
    return id;
  };
  const rl = (task: TaskSpec, method: Method, seed: number): string => {
    const id = rlId(task, method, seed);
    add({ kind: 'rl', id, task, seed, method, deps: [warm(task, seed)] });
    return id;
  };
  const variance = (task: TaskSpec, point: number, seed: number): void => {
    const policyRun = point === 0 ? null : rl(task, varianceTrainingMethod(point, s), seed);
    add({
      kind: 'variance',
      id: varianceId(task, point, seed),
      task,
      seed,
      point,
      policyRun,
      deps: [warm(task, seed), ...(policyRun ? [policyRun] : [])],
    });
  };
  const study = s.tasks.find((t) => t.id === s.studyTask);
  if (!study) throw new Error(`study task ${s.studyTask} is not one of the scale's tasks`);
  // Warm-starts first, then grid by grid and seed by seed, so that an interrupted run has whole grids done.
  if (grids.some((g) => g !== 'pilot')) for (const seed of seeds) for (const task of s.tasks) warm(task, seed);
  const byId = (id: string): Method => OBJECTIVE_METHODS.find((x) => x.id === id)!;
  for (const grid of GRID_NAMES) {
    if (!grids.includes(grid)) continue;
    if (grid === 'pilot') {
      // The power analysis's pilot, on its own seeds: the comparisons whose spread sets the number of seeds.
      for (const seed of s.pilotSeeds) {
        for (const id of PILOT_METHODS) rl(study, byId(id), seed);
        for (const point of s.variancePoints.filter((p) => p > 0)) variance(study, point, seed);
      }
      continue;
    }
    for (const seed of seeds) {
      if (grid === 'objectives')
        for (const task of s.tasks) for (const method of OBJECTIVE_METHODS) rl(task, method, seed);
      if (grid === 'ablations') for (const method of [byId('conspo'), ...ABLATION_METHODS]) rl(study, method, seed);
      if (grid === 'sweep')
        for (const param of ['tau', 'margin', 'alpha'] as const)
          for (const value of s[param]) rl(study, sweepMethod(param, value), seed);
      if (grid === 'groups') {
        for (const method of [byId('grpo'), byId('grpo+bicc')]) rl(study, method, seed);
        for (const g of s.groupSizes) for (const method of groupSizeMethods(g)) rl(study, method, seed);
      }
      if (grid === 'variance')
        for (const task of s.tasks) for (const point of s.variancePoints) variance(task, point, seed);
      if (grid === 'context' && s.contextTask) for (const method of CONTEXT_METHODS) rl(s.contextTask, method, seed);
    }
  }
  return [...jobs.values()];
}
