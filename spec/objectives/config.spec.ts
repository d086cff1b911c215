import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import {
  ConfigError,
  CONSPO_DEFAULTS,
  DAPO_DEFAULTS,
  DR_GRPO_DEFAULTS,
  GRPO_DEFAULTS,
  makeObjective,
  OBJECTIVES,
  OBJECTIVE_NAMES,
  parseCispoConfig,
  parseConspoConfig,
  parseDapoConfig,
  parseDiscoConfig,
  parseGrpoConfig,
} from '../../src/objectives/index.js';

function leftField<T>(r: E.Either<ConfigError, T>): string | undefined {
  if (E.isRight(r)) return undefined;
  expect(r.left).toBeInstanceOf(ConfigError);
  return r.left.field;
}

describe('config records: defaults', () => {
  it('paper defaults', () => {
    expect(E.getOrElseW(() => null)(parseConspoConfig())).toEqual(CONSPO_DEFAULTS);
    expect(CONSPO_DEFAULTS).toMatchObject({ tau: 10, margin: 0.01, alpha: 0.3 });
    expect(GRPO_DEFAULTS).toMatchObject({
      epsilon: 0.2,
      epsilonHigh: 0.2,
      beta: 0,
      lossType: 'grpo',
      scaleRewards: 'group',
      stdMode: 'population',
      advantageEpsilon: 0,
    });
    expect(DAPO_DEFAULTS).toMatchObject({
      epsilon: 0.2,
      epsilonHigh: 0.28,
      lossType: 'dapo',
      dynamicSampling: true,
      beta: 0,
    });
    expect(DR_GRPO_DEFAULTS).toMatchObject({ scaleRewards: 'none', lossType: 'dr_grpo' });
    for (const name of OBJECTIVE_NAMES) {
      const def = OBJECTIVES[name];
      const r: E.Either<ConfigError, unknown> = def.parse({});
      expect(E.isRight(r) && r.right).toEqual(def.defaults);
    }
  });

  it('epsilonHigh follows epsilon when only epsilon is given (TRL), except for DAPO', () => {
    expect(E.getOrElseW(() => null)(parseGrpoConfig({ epsilon: 0.1 }))).toMatchObject({
      epsilon: 0.1,
      epsilonHigh: 0.1,
    });
    expect(E.getOrElseW(() => null)(parseGrpoConfig({ epsilon: 0.1, epsilon_high: 0.3 }))).toMatchObject({
      epsilon: 0.1,
      epsilonHigh: 0.3,
    });
    expect(E.getOrElseW(() => null)(parseDapoConfig({ epsilon: 0.1 }))).toMatchObject({
      epsilon: 0.1,
      epsilonHigh: 0.28,
    });
  });

  it('TRL and verl names are accepted, for keys and for loss types', () => {
    const r = parseGrpoConfig({
      loss_type: 'seq-mean-token-sum-norm',
      scale_rewards: 'batch',
      num_generations: 8,
      clip_ratio_c: 3,
      epsilon_high: 0.28,
    });
    expect(E.getOrElseW(() => null)(r)).toMatchObject({
      lossType: 'dr_grpo',
      scaleRewards: 'batch',
      numGenerations: 8,
      dualClip: 3,
      epsilonHigh: 0.28,
    });
    for (const [name, canonical] of [
      ['seq-mean-token-mean', 'grpo'],
      ['token-mean', 'dapo'],
      ['bnpo', 'bnpo'],
      ['dr_grpo', 'dr_grpo'],
    ] as const) {
      expect(E.getOrElseW(() => null)(parseGrpoConfig({ lossType: name }))).toMatchObject({ lossType: canonical });
    }
    expect(E.getOrElseW(() => null)(parseGrpoConfig({ scale_rewards: false }))).toMatchObject({ scaleRewards: 'none' });
    expect(E.getOrElseW(() => null)(parseGrpoConfig({ norm_adv_by_std_in_grpo: false }))).toMatchObject({
      scaleRewards: 'none',
    });
    expect(E.getOrElseW(() => null)(parseDiscoConfig({ score_func: 'Lratio', kl_type: 'low_var_kl' }))).toMatchObject({
      score: 'l-ratio',
      klEstimator: 'k3',
    });
    expect(E.getOrElseW(() => null)(parseCispoConfig({ epsilon_high: 5 }))).toMatchObject({ epsilonMax: 5 });
  });
});

describe('config records: validation at the boundary names the field', () => {
  it('bad values', () => {
    expect(leftField(parseConspoConfig({ tau: -1 }))).toBe('tau');
    expect(leftField(parseConspoConfig({ tau: 0 }))).toBe('tau');
    expect(leftField(parseConspoConfig({ alpha: 0 }))).toBe('alpha');
    expect(leftField(parseConspoConfig({ alpha: 1.5 }))).toBe('alpha');
    expect(leftField(parseConspoConfig({ alpha: 1 }))).toBeUndefined();
    expect(leftField(parseConspoConfig({ margin: -0.1 }))).toBe('margin');
    expect(leftField(parseGrpoConfig({ epsilon: 0 }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ epsilon: 1 }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ epsilon: -0.2 }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ numGenerations: 1 }))).toBe('numGenerations');
    expect(leftField(parseGrpoConfig({ num_generations: 1 }))).toBe('num_generations');
    expect(leftField(parseGrpoConfig({ numGenerations: 2.5 }))).toBe('numGenerations');
    expect(leftField(parseGrpoConfig({ lossType: 'sum' }))).toBe('lossType');
    expect(leftField(parseGrpoConfig({ beta: -1 }))).toBe('beta');
    expect(leftField(parseGrpoConfig({ dualClip: 1 }))).toBe('dualClip');
    expect(leftField(parseGrpoConfig({ epsilon: '0.2' }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ epsilon: NaN }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ epsilonn: 0.2 }))).toBe('epsilonn');
    expect(leftField(parseGrpoConfig({ epsilon_low: 0.2, epsilon: 0.2 }))).toBe('epsilon');
    expect(leftField(parseGrpoConfig({ overlong: { maxLength: 100, cacheLength: 100 } }))).toBe('overlong.cacheLength');
    expect(leftField(parseGrpoConfig({ overlong: { cacheLength: 10 } }))).toBe('overlong.maxLength');
    expect(leftField(parseGrpoConfig({ overlong: { maxLength: 100, cache: 10 } }))).toBe('overlong.cache');
    // CISPO's cap is absolute: TRL's clip value 0.28 reused as the cap is the known pitfall
    expect(leftField(parseCispoConfig({ epsilon_high: 0.28 }))).toBe('epsilon_high');
    expect(leftField(parseDiscoConfig({ tau: -3 }))).toBe('tau');
  });

  it('the error carries objective, field, value and a reason', () => {
    const r = parseConspoConfig({ tau: -2 });
    expect(E.isLeft(r)).toBe(true);
    if (E.isLeft(r)) {
      expect(r.left).toMatchObject({ objective: 'conspo', field: 'tau', value: -2, _tag: 'ConfigError' });
      expect(r.left.message).toMatch(/tau.*> 0/);
    }
  });

  it('any epsilon outside (0, 1) is rejected and any inside accepted (property)', () => {
    fc.assert(
      fc.property(fc.double({ noNaN: false }), (eps) => {
        const ok = Number.isFinite(eps) && eps > 0 && eps < 1;
        expect(E.isRight(parseGrpoConfig({ epsilon: eps }))).toBe(ok);
      }),
      { numRuns: 200 },
    );
  });

  it('the registry rejects an unknown objective name as a ConfigError on `objective`', () => {
    expect(leftField(makeObjective('ppo'))).toBe('objective');
    expect(leftField(makeObjective('conspo', { tau: -1 }))).toBe('tau');
    for (const name of OBJECTIVE_NAMES) expect(E.isRight(makeObjective(name))).toBe(true);
  });
});
