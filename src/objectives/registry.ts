import * as E from 'fp-ts/lib/Either.js';
import type { RolloutBatch } from './batch.js';
import { cispoLoss, CISPO_DEFAULTS, parseCispoConfig, type CispoConfig } from './cispo.js';
import { conspoLoss, CONSPO_DEFAULTS, parseConspoConfig, type ConspoConfig } from './conspo.js';
import { discoLoss, DISCO_DEFAULTS, parseDiscoConfig, type DiscoConfig } from './disco.js';
import { ConfigError } from './errors.js';
import { gmpoLoss, GMPO_DEFAULTS, parseGmpoConfig, type GmpoConfig } from './gmpo.js';
import {
  grpoLoss,
  DAPO_DEFAULTS,
  DR_GRPO_DEFAULTS,
  GRPO_DEFAULTS,
  parseDapoConfig,
  parseDrGrpoConfig,
  parseGrpoConfig,
  type GrpoConfig,
} from './grpo.js';
import { gspoLoss, GSPO_DEFAULTS, parseGspoConfig, type GspoConfig } from './gspo.js';
import { sapoLoss, SAPO_DEFAULTS, parseSapoConfig, type SapoConfig } from './sapo.js';
import type { ConfigInput, ObjectiveFn, ObjectiveResult, TrainingProgress } from './types.js';

/** Objectives by name, for a trainer or CLI that picks one from a string: its defaults, config parser and loss. */
export interface ObjectiveDefinition<C> {
  readonly name: ObjectiveName;
  readonly defaults: C;
  readonly parse: (input?: ConfigInput) => E.Either<ConfigError, C>;
  readonly loss: ObjectiveFn<C>;
}

export interface ObjectiveConfigs {
  grpo: GrpoConfig;
  dapo: GrpoConfig;
  dr_grpo: GrpoConfig;
  gspo: GspoConfig;
  gmpo: GmpoConfig;
  cispo: CispoConfig;
  sapo: SapoConfig;
  disco: DiscoConfig;
  conspo: ConspoConfig;
}
export type ObjectiveName = keyof ObjectiveConfigs;

export const OBJECTIVES: { readonly [K in ObjectiveName]: ObjectiveDefinition<ObjectiveConfigs[K]> } = {
  grpo: { name: 'grpo', defaults: GRPO_DEFAULTS, parse: parseGrpoConfig, loss: grpoLoss },
  dapo: { name: 'dapo', defaults: DAPO_DEFAULTS, parse: parseDapoConfig, loss: grpoLoss },
  dr_grpo: { name: 'dr_grpo', defaults: DR_GRPO_DEFAULTS, parse: parseDrGrpoConfig, loss: grpoLoss },
  gspo: { name: 'gspo', defaults: GSPO_DEFAULTS, parse: parseGspoConfig, loss: gspoLoss },
  gmpo: { name: 'gmpo', defaults: GMPO_DEFAULTS, parse: parseGmpoConfig, loss: gmpoLoss },
  cispo: { name: 'cispo', defaults: CISPO_DEFAULTS, parse: parseCispoConfig, loss: cispoLoss },
  sapo: { name: 'sapo', defaults: SAPO_DEFAULTS, parse: parseSapoConfig, loss: sapoLoss },
  disco: { name: 'disco', defaults: DISCO_DEFAULTS, parse: parseDiscoConfig, loss: discoLoss },
  conspo: { name: 'conspo', defaults: CONSPO_DEFAULTS, parse: parseConspoConfig, loss: conspoLoss },
};

export const OBJECTIVE_NAMES = Object.keys(OBJECTIVES) as ObjectiveName[];

export const isObjectiveName = (name: string): name is ObjectiveName => Object.prototype.hasOwnProperty.call(OBJECTIVES, name);

/** An objective with its config parsed and bound: what a training loop calls each step. */
export interface BoundObjective {
  readonly name: ObjectiveName;
  /** The parsed config (the record for `name`). */
  readonly config: ObjectiveConfigs[ObjectiveName];
  readonly loss: (batch: RolloutBatch, progress?: TrainingProgress) => ObjectiveResult;
}

function bind<K extends ObjectiveName>(name: K, input: ConfigInput): E.Either<ConfigError, BoundObjective> {
  const def = OBJECTIVES[name] as ObjectiveDefinition<ObjectiveConfigs[K]>;
  return E.map((config: ObjectiveConfigs[K]): BoundObjective => ({ name, config, loss: (batch, progress) => def.loss(batch, config, progress) }))(def.parse(input));
}

/** Look an objective up by name and parse its config. An unknown name is a ConfigError on field `objective`. */
export function makeObjective(name: string, input: ConfigInput = {}): E.Either<ConfigError, BoundObjective> {
  if (!isObjectiveName(name)) return E.left(new ConfigError('registry', 'objective', name, `must be one of ${OBJECTIVE_NAMES.join(', ')}`));
  return bind(name, input);
}
