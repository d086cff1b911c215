import * as E from 'fp-ts/lib/Either.js';
import { dirname, join, resolve } from '../platform/files.js';
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { getDefaultBackend } from '../core/runtime.js';
import { dispose, tidy } from '../core/scope.js';
import { stopGradient, valueAndGrad } from '../core/transforms.js';
import { loadCheckpoint, saveCheckpoint, type Json } from '../nn/checkpoint.js';
import { adamwInit, adamwStep, type OptimizerState } from '../nn/optim.js';
import { lrAt } from '../nn/schedule.js';
import { initParams, smallConfig, validateConfig, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import { makeObjective, type BoundObjective } from '../objectives/registry.js';
import { groupStats } from '../objectives/groups.js';
import { rccAdvantages, sequenceDeltas } from '../objectives/rcc.js';
import { sampleRollouts, type Rollouts } from '../rl/sampler.js';
import { rescoreOldLogProbs } from '../rl/score.js';
import { selectRows, type SequenceBatch } from '../rl/batch.js';
import { biccInput, conditionBatch } from '../rl/bicc.js';
import { sftBatch, sftExamples, sftLoss } from '../rl/sft.js';
import { additionTask, multiplicationTask } from '../tasks/arithmetic.js';
import { countdownTask } from '../tasks/countdown.js';
import { tokenizerFor } from '../tasks/index.js';
import { heldOutProblems, sampleProblems, type Problem, type Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import { evaluate, type EvalResult } from './evaluate.js';
import { MetricsWriter, readMetrics, type MetricRecord } from './metrics.js';
import { updatePolicy, type AdamWSettings } from './rl-step.js';

/**
 * The RLVR training loop: a supervised warm-start on worked solutions (so the policy starts with a non-trivial
 * pass rate, as RLVR assumes), then RL steps (sample G completions per prompt, verify, advantages, objective,
 * `numIterations` epochs of AdamW), held-out evaluation (pass@1 greedy, avg@k and pass@k), metrics as JSON
 * lines, checkpoints that resume exactly.
 */
export interface TrainHooks {
  /** Every metric record, as it is written. */
  readonly onRecord?: (record: MetricRecord) => void;
  /** Called once per step with the phase's progress, for a progress display. */
  readonly onProgress?: (p: { phase: 'warmstart' | 'rl'; step: number; total: number; record: MetricRecord }) => void;
  /** Each RL step's rollouts with the verifier's rewards, for a display (row r answers `prompts[promptIndex[r]]`). */
  readonly onRollouts?: (r: RolloutView) => void;
}

export interface RolloutView {
  readonly step: number;
  readonly prompts: readonly string[];
  readonly promptIndex: readonly number[];
  readonly completions: readonly string[];
  readonly rewards: readonly number[];
}

export interface TrainResult {
  readonly config: TransformerConfig;
  readonly params: TransformerParams;
  readonly warmStart: EvalResult | null;
  readonly final: EvalResult;
  readonly records: readonly MetricRecord[];
}

export function taskFor(cfg: TrainConfig): Task<Problem> {
  const digits = cfg.digits ?? undefined;
  switch (cfg.task) {
    case 'addition':
      return additionTask(digits === undefined ? {} : { digits });
    case 'multiplication':
      return multiplicationTask(digits === undefined ? {} : { digits: [digits, 1] });
    case 'countdown':
      return countdownTask();
  }
}

interface Phase {
  phase: 'warmstart' | 'rl';
  step: number;
}

/** Everything a run needs, built from the config (and a checkpoint when resuming). */
interface Run {
  readonly cfg: TrainConfig;
  readonly task: Task<Problem>;
  readonly tokenizer: Tokenizer;
  readonly config: TransformerConfig;
  readonly objective: BoundObjective;
  readonly needsReference: boolean;
  readonly heldOut: readonly Problem[];
  readonly writer: MetricsWriter;
  readonly records: MetricRecord[];
  rng: Rng;
  params: TransformerParams;
  opt: OptimizerState<TransformerParams>;
  reference: TransformerParams | null;
  at: Phase;
  warmStartEval: EvalResult | null;
}

function setup(cfg: TrainConfig, userTask: Task<Problem> | undefined): E.Either<TrainConfigError, Omit<Run, 'params' | 'opt' | 'reference' | 'at' | 'warmStartEval' | 'rng'>> {
  const task = userTask ?? taskFor(cfg);
  const tokenizer = tokenizerFor(task);
  let config: TransformerConfig;
  try {
    config = validateConfig(smallConfig(tokenizer.vocabSize, { ...cfg.model }));
  } catch (e) {
    return E.left(new TrainConfigError('model', cfg.model, e instanceof Error ? e.message : String(e)));
  }
  const objectiveOptions = { ...cfg.objectiveOptions };
  const objective = makeObjective(cfg.objective, objectiveOptions);
  if (E.isLeft(objective)) return E.left(new TrainConfigError(`objective.${objective.left.field}`, objective.left.value, objective.left.message));
  if (cfg.advantage === 'rcc' && (cfg.objective === 'conspo' || cfg.objective === 'disco')) {
    return E.left(new TrainConfigError('advantage', cfg.advantage, `does not apply: ${cfg.objective} scores rollouts by likelihood, not by advantages`));
  }
  const beta = (objective.right.config as { beta?: number }).beta ?? 0;
  return E.right({
    cfg,
    task,
    tokenizer,
    config,
    objective: objective.right,
    needsReference: beta > 0 || cfg.advantage === 'rcc',
    heldOut: heldOutProblems(task, cfg.evalPrompts, 1234),
    writer: new MetricsWriter(cfg.outputDir ? join(cfg.outputDir, 'metrics.jsonl') : null),
    records: [],
  });
}

function emit(run: Run, record: MetricRecord, hooks: TrainHooks): void {
  run.records.push(record);
  run.writer.write(record);
  hooks.onRecord?.(record);
}

async function runEval(run: Run, hooks: TrainHooks, label: string): Promise<EvalResult> {
  const { cfg } = run;
  // Evaluation draws from its own generator so that evaluating does not shift the training stream.
  const result = await evaluate(run.params, run.config, run.tokenizer, run.task, run.heldOut, new Rng(cfg.seed + 991), {
    k: cfg.evalK,
    temperature: cfg.temperature,
    topP: cfg.topP,
    maxNewTokens: cfg.maxCompletionLength,
  });
  emit(run, { phase: 'eval', step: run.at.step, label, at: run.at.phase, pass_at_1: result.passAt1, [`avg_at_${result.k}`]: result.avgAtK, [`pass_at_${result.k}`]: result.passAtK }, hooks);
  return result;
}

async function save(run: Run, dir: string): Promise<void> {
  const trainerState: Json = { phase: run.at.phase, step: run.at.step, warmStartEval: run.warmStartEval ? { ...run.warmStartEval } : null };
  const res = await saveCheckpoint(dir, { config: run.config, params: run.params, optimizer: run.opt, rngs: { train: run.rng.state() }, trainerState })();
  if (E.isLeft(res)) throw res.left;
}

async function warmStartStep(run: Run, hooks: TrainHooks): Promise<void> {
  const { cfg } = run;
  const t0 = performance.now();
  const examples = sftExamples(run.task, sampleProblems(run.task, cfg.warmStartBatchSize, run.rng));
  const batch = sftBatch(run.tokenizer, examples);
  const lr = lrAt({ peakLr: cfg.warmStartLearningRate, warmupSteps: Math.min(20, cfg.warmStartSteps), totalSteps: cfg.warmStartSteps, minLr: cfg.warmStartLearningRate / 10 }, run.opt.step);
  const next = tidy(() => {
    const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, run.config, batch))(run.params);
    const stepped = adamwStep(run.params, grads, run.opt, { lr, maxGradNorm: cfg.maxGradNorm, weightDecay: cfg.weightDecay });
    return { params: stepped.params, opt: stepped.state, loss };
  });
  dispose([run.params, run.opt]);
  run.params = next.params;
  run.opt = next.opt;
  const loss = (await next.loss.data())[0]!;
  next.loss.dispose();
  run.at.step++;
  const seconds = (performance.now() - t0) / 1000;
  const record: MetricRecord = { phase: 'warmstart', step: run.at.step, loss, lr, seconds, tokens_per_s: (batch.batchSize * (batch.promptLen + batch.completionLen)) / seconds };
  emit(run, record, hooks);
  hooks.onProgress?.({ phase: 'warmstart', step: run.at.step, total: cfg.warmStartSteps, record });
}

function rlSettings(cfg: TrainConfig): (step: number) => AdamWSettings {
  const totalUpdates = cfg.steps * cfg.numIterations * Math.ceil(cfg.promptsPerStep / (cfg.groupsPerMinibatch ?? cfg.promptsPerStep));
  return (step) => ({
    lr: lrAt({ peakLr: cfg.learningRate, warmupSteps: Math.min(cfg.warmupSteps, totalUpdates), totalSteps: totalUpdates }, step),
    maxGradNorm: cfg.maxGradNorm,
    weightDecay: cfg.weightDecay,
  });
}

async function rlStep(run: Run, hooks: TrainHooks): Promise<void> {
  const { cfg } = run;
  const t0 = performance.now();
  const problems = sampleProblems(run.task, cfg.promptsPerStep, run.rng);
  const sampled: Rollouts = await sampleRollouts(run.params, run.config, run.tokenizer, problems.map((p) => p.prompt), run.rng, {
    groupSize: cfg.numGenerations,
    maxNewTokens: cfg.maxCompletionLength,
    temperature: cfg.temperature,
    topP: cfg.topP,
    refParams: run.needsReference ? run.reference : null,
  });
  // Off the CPU reference, pi_old is re-scored by the training forward so the first ratio is exactly 1.
  const rollouts = run.params.embed.weight.backend.name === 'cpu' ? sampled : await rescoreOldLogProbs(run.params, run.config, sampled);
  const rewards = rollouts.completions.map((c, r) => run.task.verify(c, problems[rollouts.promptIndex[r]!]!));
  const { promptIndex, completions } = rollouts;
  hooks.onRollouts?.({ step: run.at.step + 1, prompts: problems.map((p) => p.prompt), promptIndex, completions, rewards });
  const advantages =
    cfg.advantage === 'rcc'
      ? rccAdvantages(rewards, sequenceDeltas(rollouts.oldLogProbs, rollouts.refLogProbs!, rollouts.completionMask, rollouts.completionLen, cfg.rccDelta), rollouts.promptIndex)
      : null;
  const sampledAt = performance.now();
  const settings = rlSettings(cfg);
  const rlStepIndex = run.at.step;
  const result = updatePolicy(
    { params: run.params, opt: run.opt },
    run.config,
    {
      rollouts,
      rewards,
      advantages,
      objective: run.objective,
      progress: { step: rlStepIndex, totalSteps: cfg.steps },
      numIterations: cfg.numIterations,
      groupsPerMinibatch: cfg.groupsPerMinibatch ?? cfg.promptsPerStep,
      maxCompletionLength: cfg.maxCompletionLength,
      ...(cfg.bicc ? { scoredBatch: biccScorer(run, rollouts, rewards) } : {}),
    },
    settings,
    run.rng,
  );
  if (result.params !== run.params) dispose([run.params, run.opt]);
  run.params = result.params;
  run.opt = result.opt;
  const metrics = await readMetrics(result.metrics);
  run.at.step++;
  const seconds = (performance.now() - t0) / 1000;
  const stats = groupStats(rewards, rollouts.promptIndex);
  const sampledTokens = rollouts.completionLengths.reduce((s, x) => s + x, 0);
  const record: MetricRecord = {
    phase: 'rl',
    step: run.at.step,
    reward: rewards.reduce((s, x) => s + x, 0) / rewards.length,
    groups_mixed: stats.filter((s) => s.rewardStd > 0).length / stats.length,
    ...metrics,
    lr: settings(run.opt.step - 1).lr,
    seconds,
    sample_seconds: (sampledAt - t0) / 1000,
    tokens_per_s: (sampledTokens + result.tokensScored) / seconds,
  };
  emit(run, record, hooks);
  hooks.onProgress?.({ phase: 'rl', step: run.at.step, total: cfg.steps, record });
}

/**
 * BICC (training only): each rollout is scored under [query; opposite-class rollouts of its group] while pi_old
 * and pi_ref stay on the plain context. One conditioned batch per step; minibatches take its rows.
 */
function biccScorer(run: Run, rollouts: Rollouts, rewards: readonly number[]): (rows: readonly number[]) => SequenceBatch {
  const cond = conditionBatch(biccInput(rollouts, rewards), run.tokenizer, run.config, { contextShare: run.cfg.biccContextShare, threshold: 0.5 });
  return (rows) => selectRows(cond.batch, rows);
}

export interface TrainOptions extends TrainHooks {
  /** Where parameters live (default: the default backend). */
  readonly backend?: Backend;
  /** A task of the user's (its own prompts and reward function) instead of the built-in `cfg.task`. */
  readonly task?: Task<Problem>;
}

/** Train from scratch (or resume from `cfg.resume`); returns held-out results after warm-start and after RL. */
export async function train(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  const backend = opts.backend ?? getDefaultBackend();
  const base = setup(cfg, opts.task);
  if (E.isLeft(base)) throw base.left;
  const run: Run = { ...base.right, ...(cfg.resume ? await resume(cfg.resume, backend) : fresh(base.right.config, cfg.seed, backend)) };
  const checkpointDir = cfg.outputDir ? join(cfg.outputDir, 'checkpoint') : null;
  const maybeSave = async (): Promise<void> => {
    if (checkpointDir && cfg.checkpointEvery > 0 && run.at.step % cfg.checkpointEvery === 0) await save(run, checkpointDir);
  };

  while (run.at.phase === 'warmstart' && run.at.step < cfg.warmStartSteps) {
    await warmStartStep(run, opts);
    await maybeSave();
  }
  if (run.at.phase === 'warmstart') {
    run.warmStartEval = await runEval(run, opts, 'after-warmstart');
    // RL starts with a fresh optimizer. The warm-started policy is the frozen reference: tensors are immutable,
    // so new handles over the same storage serve (no copy); it is saved once beside the checkpoints.
    dispose(run.opt);
    run.opt = adamwInit(run.params);
    run.at = { phase: 'rl', step: 0 };
    if (run.needsReference) run.reference = stopGradient(run.params);
    if (cfg.outputDir) await saveReference(run.config, run.params, join(cfg.outputDir, 'reference'));
  } else if (run.needsReference) {
    const from = join(dirname(cfg.resume!), 'reference');
    run.reference = await loadReference(from, backend);
    // A resumed run writing elsewhere keeps its reference beside its own checkpoints, so it can be resumed too.
    const to = cfg.outputDir ? join(cfg.outputDir, 'reference') : null;
    if (to && resolve(to) !== resolve(from)) await saveReference(run.config, run.reference, to);
  }
  while (run.at.step < cfg.steps) {
    await rlStep(run, opts);
    if (cfg.evalEvery > 0 && run.at.step % cfg.evalEvery === 0 && run.at.step < cfg.steps) await runEval(run, opts, 'during-rl');
    await maybeSave();
  }
  const final = await runEval(run, opts, 'after-rl');
  if (checkpointDir) await save(run, checkpointDir);
  if (run.reference) dispose(run.reference);
  dispose(run.opt);
  return { config: run.config, params: run.params, warmStart: run.warmStartEval, final, records: run.records };
}

async function saveReference(config: TransformerConfig, params: TransformerParams, dir: string): Promise<void> {
  const res = await saveCheckpoint(dir, { config, params })();
  if (E.isLeft(res)) throw res.left;
}

async function loadReference(dir: string, backend: Backend): Promise<TransformerParams> {
  const res = await loadCheckpoint(dir, { backend })();
  if (E.isLeft(res)) throw res.left;
  return res.right.params;
}

/** The mutable part of a run at its start. */
type RunStart = Pick<Run, 'rng' | 'params' | 'opt' | 'reference' | 'at' | 'warmStartEval'>;

function fresh(config: TransformerConfig, seed: number, backend: Backend): RunStart {
  const rng = new Rng(seed);
  const params = initParams(config, rng, { backend });
  return { rng, params, opt: adamwInit(params), reference: null, at: { phase: 'warmstart', step: 0 }, warmStartEval: null };
}

async function resume(dir: string, backend: Backend): Promise<RunStart> {
  const res = await loadCheckpoint(dir, { backend })();
  if (E.isLeft(res)) throw res.left;
  const ck = res.right;
  const state = ck.trainerState as { phase?: unknown; step?: unknown; warmStartEval?: unknown } | null;
  if (!state || (state.phase !== 'warmstart' && state.phase !== 'rl') || !Number.isInteger(state.step)) {
    throw new TrainConfigError('resume', dir, 'has no trainer state (phase, step) to resume from');
  }
  if (!ck.optimizer || !ck.rngs?.train) throw new TrainConfigError('resume', dir, 'lacks the optimizer state or the training RNG state');
  return {
    rng: Rng.fromState(ck.rngs.train),
    params: ck.params,
    opt: ck.optimizer,
    reference: null,
    at: { phase: state.phase, step: state.step as number },
    warmStartEval: (state.warmStartEval as EvalResult | null) ?? null,
  };
}
