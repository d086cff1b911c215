/**
 * Golden vectors for the Python package (python/rlvr_objectives): random rollout batches run through the project's
 * own objectives, in f64 on the reference backend, with the loss, every metric and the gradient of the loss with
 * respect to the log-probs (`valueAndGrad`), log-ratios past the bound among them; the bad input the objectives
 * refuse, and how (rejections.ts); RCC's advantages and sequence deltas; the `\boxed{}` verifier's rewards on the
 * task generators' answers and on adversarial strings. python/tests reproduces every number and every refusal.
 *
 * Deterministic (a seeded `Rng`, no clock), so spec/golden/golden.spec.ts can regenerate the files in memory and
 * compare them with the committed ones: a change to an objective made on one side only fails there or in
 * python/tests. Written by `npm run export:golden` (examples/export-golden.ts).
 */
import * as E from 'fp-ts/lib/Either.js';
import {
  boxed,
  extractBoxed,
  normalizeNumber,
  objectives as obj,
  Rng,
  TASKS,
  TASK_NAMES,
  type Problem,
  type Task,
  type Tensor,
  tensor,
  valueAndGrad,
  verifyBoxed,
  verifyBoxedNumber,
} from '../../src/index.js';
import { backend, batchNeeds, LOSS_TYPES, out, pick, randomBatch, randomConfig, scaling, toBatch } from './batches.js';
import { rejectionCases } from './rejections.js';

/** Batches per objective and RCC cases: the issue asks for at least 200 each. */
export const CASES = 200;
/** Batches per objective whose log-ratios reach past the objectives' bound of +-20, after the CASES ones. */
export const EXTREME_CASES = 40;
/**
 * Batches per objective with verl's dual clip (dualClip, verl's clip_ratio_c) and ratios up to e^12, for those that
 * have it, shaped as verl runs them (verl's aggregations, no KL term in the loss, advantages from the rewards), so
 * python/tests checks verl's clip_ratio_c on them through the verl adapter.
 */
export const DUAL_CLIP_CASES = 40;

/** How a stream of golden cases draws its batches: at random, past the bound, or dual-clipped. */
type Stream = 'random' | 'extreme' | 'dual-clip';
/** One golden case: the batch, the parsed config, the progress, and what the TypeScript objective gives. */
function goldenCase(name: obj.ObjectiveName, rng: Rng, i: number, stream: Stream = 'random'): Record<string, unknown> {
  const drawn = randomConfig(name, rng, i);
  // verl's aggregations are the first three loss types.
  const dual = () => ({ dualClip: pick(rng, [3, 1.5, 2]), beta: 0, overlong: null, lossType: LOSS_TYPES[i % 3] });
  const parsed = obj.makeObjective(name, stream === 'dual-clip' ? { ...drawn, ...dual() } : drawn);
  if (E.isLeft(parsed)) throw parsed.left;
  const config = parsed.right.config as unknown as Record<string, unknown>;
  const raw = randomBatch(rng, {
    ...batchNeeds(name, parsed.right),
    ...(stream === 'random' ? {} : { oldMode: stream === 'extreme' ? ('extreme' as const) : ('far' as const) }),
    verlShaped: stream === 'dual-clip',
  });
  const progress = { step: rng.int(50), totalSteps: 40 + rng.int(20) };
  const [[loss, metrics], g] = valueAndGrad(
    (lp: Tensor) => {
      const r = parsed.right.loss(toBatch(raw, lp), progress);
      return [r.loss, r.metrics] as [Tensor, obj.Metrics];
    },
    { hasAux: true },
  )(tensor(raw.logProbs, [raw.b, raw.t], { dtype: 'f64', backend }));
  const metricValues: Record<string, number> = {};
  for (const k of Object.keys(metrics).sort()) metricValues[k] = out(metrics[k]!.dataSync()[0]!);
  return {
    config,
    progress,
    batch: raw,
    loss: out(loss.dataSync()[0]!),
    metrics: metricValues,
    grad: Array.from(g.dataSync(), out),
  };
}

function rccCase(rng: Rng): Record<string, unknown> {
  const raw = randomBatch(rng, { kind: 'advantage', groupSize: null, withRef: true, withLengths: false });
  const old = raw.oldLogProbs ?? raw.logProbs;
  const ref = raw.refLogProbs!;
  const mode = pick(rng, ['sum', 'mean'] as const);
  const deltas = obj.sequenceDeltas(old, ref, raw.mask, raw.t, mode);
  // Scaled up now and then so the first-order baseline leaves the reward range and the clamp acts (issue 21).
  const scale = rng.uniform() < 0.3 ? 8 : 1;
  const options = rng.uniform() < 0.5 ? obj.RCC_ADVANTAGES : scaling(rng);
  const scaled = deltas.map((d) => d * scale);
  return {
    oldLogProbs: old,
    refLogProbs: ref,
    mask: raw.mask,
    t: raw.t,
    mode,
    scale,
    rewards: raw.rewards,
    groupIds: raw.groupIds,
    options,
    deltas: deltas.map(out),
    advantages: obj.rccAdvantages(raw.rewards, scaled, raw.groupIds, options).map(out),
  };
}

/** Strings built to break a verifier: nesting, several boxes, whitespace of every kind, signs, zeros, unicode. */
function adversarialStrings(rng: Rng): string[] {
  const fixed = [
    '',
    '\\boxed',
    '\\boxed{',
    '\\boxed}',
    '\\boxed{}',
    '\\boxed{ }',
    '\\boxed 5',
    '\\boxed5',
    '\\fbox{5}',
    '\\boxed{5',
    '\\boxed{5}}',
    '\\boxed{{5}}',
    '\\boxed{\\frac{1}{2}}',
    '\\boxed{1}\\boxed{2}',
    '\\boxed{1} then \\boxed{2',
    '\\boxed {7}',
    '\\boxed\n{7}',
    '\\boxed\t \n{7}',
    '\\\\boxed{7}',
    '\\Boxed{7}',
    '\\boxed{\\boxed{7}}',
    '\\boxed{$7$}',
    '\\boxed{$$7$$}',
    '\\boxed{$}',
    '\\boxed{1,000}',
    '\\boxed{1,0,0,0}',
    '\\boxed{+7}',
    '\\boxed{-0}',
    '\\boxed{-0.0}',
    '\\boxed{+-7}',
    '\\boxed{--7}',
    '\\boxed{007}',
    '\\boxed{7.}',
    '\\boxed{.5}',
    '\\boxed{.}',
    '\\boxed{-.}',
    '\\boxed{0.50}',
    '\\boxed{1e3}',
    '\\boxed{0x10}',
    '\\boxed{Infinity}',
    '\\boxed{NaN}',
    '\\boxed{7 }',
    '\\boxed{ 7}',
    '\\boxed{7\u00a0}',
    '\\boxed{\u20037}',
    '\\boxed{7\ufeff}',
    '\\boxed{7\u0085}',
    '\\boxed{7\u001c}',
    '\\boxed{7\u2028}',
    '\\boxed{\u0667}',
    '\\boxed{\uff17}',
    '\\boxed{\u00b2}',
    '\\boxed{\ud83d\ude00}',
    '\\boxed{7}\ud83d\ude00',
    '\ud83d\ude00\\boxed{\u00e9}',
    '\\boxed{caf\u00e9}',
    '\\boxed{x  y}',
    '\\boxed{ x\ty }',
    '\\boxed{\\{7\\}}',
    '\\boxed{7}\\boxed',
    '\\boxed{7}\\boxed{',
    '\\boxed{12}34}',
  ];
  const pieces = [
    '\\boxed{',
    '\\boxed',
    '{',
    '}',
    '\\fbox{',
    ' ',
    '\t',
    '\n',
    '\u00a0',
    '\u3000',
    '\ufeff',
    '\u0085',
    '$',
    ',',
    '.',
    '+',
    '-',
    '0',
    '00',
    '1',
    '7',
    '42',
    '3.14',
    '\u0663',
    '\uff13',
    'x',
    '\\frac{1}{2}',
    'e',
    '\u00e9',
    '\ud83d\ude00',
  ];
  const random: string[] = [];
  while (fixed.length + random.length < 1200) {
    const n = 1 + rng.int(7);
    let s = '';
    for (let k = 0; k < n; k++) s += pick(rng, pieces);
    if (rng.uniform() < 0.6)
      s = `${pick(rng, ['', 'so ', 'The answer is '])}\\boxed{${s}}${pick(rng, ['', '.', '}', ' done'])}`;
    random.push(s);
  }
  return [...fixed, ...random];
}

function boxedCases(rng: Rng): Record<string, unknown>[] {
  const cases: Record<string, unknown>[] = [];
  const record = (completion: string, answer: string, source: string): void => {
    cases.push({
      source,
      completion,
      answer,
      extracted: extractBoxed(completion),
      normalized: normalizeNumber(completion),
      number: verifyBoxedNumber(completion, answer),
      text: verifyBoxed(completion, answer),
    });
  };
  // The task generators' answers: their worked solutions, and the boxed answer in the ways a model writes it.
  for (const name of TASK_NAMES) {
    const task: Task<Problem> = TASKS[name].make(null);
    const taskRng = new Rng(17);
    for (let k = 0; k < 100; k++) {
      const p = task.generatePrompt(taskRng);
      const wrong = String(Number(p.answer) + 1);
      record(task.workedSolution(p), p.answer, name);
      record(`${p.prompt} ${boxed(` ${p.answer} `)}`, p.answer, name);
      record(boxed(`+${p.answer}`), p.answer, name);
      record(boxed(`0${p.answer}.0`), p.answer, name);
      record(boxed(wrong), p.answer, name);
    }
  }
  const answers = ['7', '-7', '0', '42', '1000', '3.14', '0.5', 'x y', '\\frac{1}{2}', '', '\u0667'];
  // Half the time the answer is what the string boxes, respaced or renormalised, so that 1s are as common as 0s.
  for (const s of adversarialStrings(rng)) {
    const inside = extractBoxed(s);
    const near =
      inside === null ? null : pick(rng, [inside, ` ${inside}  `, normalizeNumber(inside) ?? inside, `0${inside}`]);
    record(s, near !== null && rng.uniform() < 0.5 ? near : pick(rng, answers), 'adversarial');
  }
  return cases;
}

/** A file per objective, RCC and the verifier: name -> JSON text (one case per line, so diffs stay readable). */
export function goldenFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  // The head's fields, then "cases" with one case per line.
  const lines = (head: Record<string, unknown>, cases: Record<string, unknown>[]): string =>
    `${JSON.stringify(head).slice(0, -1)},"cases":[\n${cases.map((c) => JSON.stringify(c)).join(',\n')}\n]}\n`;
  obj.OBJECTIVE_NAMES.forEach((name, n) => {
    const rng = new Rng(1000 + n);
    const cases = Array.from({ length: CASES }, (_, i) => goldenCase(name, rng, i));
    // Each from a stream of its own, so the cases above do not change with these.
    const far = new Rng(5000 + n);
    cases.push(...Array.from({ length: EXTREME_CASES }, (_, i) => goldenCase(name, far, i, 'extreme')));
    if ('dualClip' in obj.OBJECTIVES[name].defaults) {
      const dual = new Rng(7000 + n);
      cases.push(...Array.from({ length: DUAL_CLIP_CASES }, (_, i) => goldenCase(name, dual, i, 'dual-clip')));
    }
    files[`${name}.json`] = lines({ objective: name, defaults: obj.OBJECTIVES[name].defaults }, cases);
  });
  const rccRng = new Rng(2000);
  files['rcc.json'] = lines(
    { defaults: obj.RCC_ADVANTAGES },
    Array.from({ length: CASES }, () => rccCase(rccRng)),
  );
  files['rejections.json'] = lines(
    { nonFinite: 'NaN, Infinity and -Infinity are written as strings' },
    rejectionCases(),
  );
  files['boxed.json'] = lines({ verifier: 'src/tasks/boxed.ts' }, boxedCases(new Rng(3000)));
  return files;
}
