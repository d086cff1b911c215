import { RlvrError } from '../core/errors.js';

/**
 * A configuration value is invalid. `field` names the offending key (camelCase, as in the typed records), `value`
 * is what was given, `objective` which parser rejected it.
 */
export class ConfigError extends RlvrError {
  readonly _tag = 'ConfigError' as const;
  constructor(
    readonly objective: string,
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`${objective} config: ${field} = ${fmt(value)}: ${reason}`);
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

function fmt(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  try {
    return typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
  } catch {
    return String(v);
  }
}
