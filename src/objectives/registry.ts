import * as E from 'fp-ts/lib/Either.js';
import type { RolloutBatch } from './batch.js';
import { CISPO } from './cispo.js';
import { CONSPO } from './conspo.js';
import { DISCO } from './disco.js';
import { ConfigError } from './errors.js';
import { GMPO } from './gmpo.js';
import { DAPO, DR_GRPO, GRPO } from './grpo.js';
import { GSPO } from './gspo.js';
import { SAPO } from './sapo.js';
import type { ConfigInput, ObjectiveDefinition, ObjectiveResult, TrainingProgress } from './types.js';

/**
 * Objectives by name, for a trainer or CLI that picks one from a string. Each definition (config parser and
 * defaults, loss, capabilities) lives beside its loss; adding an objective is its file and one line here.
 */
export const OBJECTIVES = {
  grpo: GRPO,
  dapo: DAPO,
  dr_grpo: DR_GRPO,
  gspo: GSPO,
  gmpo: GMPO,
  cispo: CISPO,
  sapo: SAPO,
  disco: DISCO,
  conspo: CONSPO,
} as const;

export type ObjectiveName = keyof typeof OBJECTIVES;
/** Each objective's config record, by name. */
export type ObjectiveConfigs = { readonly [K in ObjectiveName]: (typeof OBJECTIVES)[K]['defaults'] };
export type { ObjectiveDefinition };

export const OBJECTIVE_NAMES = Object.keys(OBJECTIVES) as ObjectiveName[];

export const isObjectiveName = (name: string): name is ObjectiveName => Object.hasOwn(OBJECTIVES, name);

/** An objective with its config parsed and bound: what a training loop calls each step. */
export interface BoundObjective {
  readonly name: ObjectiveName;
  /** The parsed config (the record for `name`). */
  readonly config: ObjectiveConfigs[ObjectiveName];
  readonly loss: (batch: RolloutBatch, progress?: TrainingProgress) => ObjectiveResult;
  /** See `ObjectiveDefinition`. */
  readonly usesAdvantages: boolean;
  readonly contrastive: boolean;
  /** Under this config: whether the loop must record the reference policy's log-probs. */
  readonly klToReference: boolean;
}

function bind<C>(
  def: ObjectiveDefinition<C>,
  name: ObjectiveName,
  input: ConfigInput,
): E.Either<ConfigError, BoundObjective> {
  return E.map(
    (config: C): BoundObjective => ({
      name,
      config: config as ObjectiveConfigs[ObjectiveName],
      loss: (batch, progress) => def.loss(batch, config, progress),
      usesAdvantages: def.usesAdvantages,
      contrastive: def.contrastive,
      klToReference: def.klToReference(config),
    }),
  )(def.parse(input));
}

/** Look an objective up by name and parse its config. An unknown name is a ConfigError on field `objective`. */
export function makeObjective(name: string, input: ConfigInput = {}): E.Either<ConfigError, BoundObjective> {
  if (!isObjectiveName(name)) {
    return E.left(new ConfigError('registry', 'objective', name, `must be one of ${OBJECTIVE_NAMES.join(', ')}`));
  }
  const def = OBJECTIVES[name] as ObjectiveDefinition<ObjectiveConfigs[typeof name]>;
  return bind(def, name, input);
}
