import { FieldError, quoteValue, RlvrError } from '../core/errors.js';

/**
 * A configuration value is invalid. `field` names the offending key (camelCase, as in the typed records), `value`
 * is what was given, `objective` which parser rejected it.
 */
export class ConfigError extends FieldError {
  readonly _tag = 'ConfigError' as const;
  constructor(
    readonly objective: string,
    field: string,
    value: unknown,
    reason: string,
  ) {
    super(field, value, reason, `${objective} config: ${field} = ${quoteValue(value)}: ${reason}`);
  }
}

/**
 * A rollout batch is invalid. `field` names the batch field (`rewards`, `logProbs`, `mask`, ...), `index` the flat
 * index of the first offending entry where there is one.
 */
export class BatchError extends RlvrError {
  readonly _tag = 'BatchError' as const;
  constructor(
    readonly kind: 'shape' | 'non-finite' | 'value' | 'missing',
    readonly field: string,
    readonly detail: string,
    readonly index?: number,
  ) {
    super(`batch.${field}${index === undefined ? '' : `[${index}]`}: ${detail}`);
  }
}
