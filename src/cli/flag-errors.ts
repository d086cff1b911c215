import { TrainConfigError } from '../training/config.js';
import { TRAIN_FLAG_BY_NAME, TRAIN_FLAG_TABLE, type TrainFlag } from './train-flags.js';

/**
 * A settings error as the command line states it. The config names its fields as the library spells them
 * (`memoryLimitGb`, `lora.r`, the objective's `epsilon`); a user typed flags. Each field is mapped back through the
 * flag table to the flag that sets it, the value shown as typed, and the other settings a reason names in the
 * config's form `field (--flag)` are named by their flags alone.
 */

/** The flags a command line gave (without their dashes), with their texts in the order typed (a switch's: true). */
export type TypedFlags = ReadonlyMap<string, string | true>;

/**
 * The flag that sets a config field: its row (`lora.r`: `--lora-r`); an objective's option by its name
 * (`objective.epsilon`: `--epsilon`); for a whole record (`lora`, `model`), the first of its flags typed.
 */
function flagOfField(field: string, typed: TypedFlags): TrainFlag | undefined {
  const target = field.startsWith('objective.') ? `objectiveOptions.${field.slice('objective.'.length)}` : field;
  const row = TRAIN_FLAG_TABLE.find((f) => f.sets === target);
  if (row) return row;
  const first = [...typed.keys()].find((name) => TRAIN_FLAG_BY_NAME.get(name)?.sets.startsWith(`${field}.`));
  return first === undefined ? undefined : TRAIN_FLAG_BY_NAME.get(first);
}

/** A flag's text as a message quotes it: a number as a number (not "3"), a switch as nothing (null). */
export function typedFlagValue(f: TrainFlag, text: string | true): unknown {
  if (text === true) return null;
  return f.kind !== 'text' && text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
}

/** What the user typed for a flag; for one not typed, the config's value unless it is a record. */
function typedValue(f: TrainFlag, typed: TypedFlags, fallback: unknown): unknown {
  const text = typed.get(f.flag);
  if (text === undefined) return typeof fallback === 'object' ? null : fallback;
  return typedFlagValue(f, text);
}

/** The reason with each `field (--flag)` it names written as the flag alone. */
export const reasonInFlags = (reason: string): string => reason.replace(/\b[A-Za-z][\w.]* \((--[a-z0-9-]+)\)/g, '$1');

/**
 * `e` naming the flag the user typed for its field, or `e` as it is when it names a flag already (the scanner's)
 * or a field no flag sets.
 */
export function inFlagTerms(e: TrainConfigError, typed: TypedFlags): TrainConfigError {
  if (e.field.startsWith('--')) return e;
  const f = flagOfField(e.field, typed);
  if (f === undefined) return e;
  return new TrainConfigError(`--${f.flag}`, typedValue(f, typed, e.value), reasonInFlags(e.reason));
}
