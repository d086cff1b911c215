import * as E from 'fp-ts/lib/Either.js';

/**
 * Validation at the boundary, as small fp-ts `Either` combinators: a `Check<T>` turns an unknown value into a T or
 * an `Issue` (the path of keys as the caller spelled them, and why). `parseRecord` checks a partial record against
 * a `Spec` (one check per field), resolving aliases and snake_case keys, rejecting unknown keys, and filling the
 * rest from defaults. The objectives' configs, `TrainConfig` and BICC's options are all parsed with these; each
 * caller wraps the `Issue` into its own typed error.
 */
export interface Issue {
  readonly path: readonly string[];
  readonly reason: string;
}
export type Check<T> = (v: unknown) => E.Either<Issue, T>;
export type Spec<C> = { readonly [K in keyof C]-?: Check<C[K]> };
/** Other names a caller may use for a field (TRL/verl names, ...); snake_case forms of the fields need none. */
export type Aliases<C> = Readonly<Record<string, keyof C & string>>;

export const fail = (reason: string): E.Either<Issue, never> => E.left({ path: [], reason });

export const num =
  (ok: (x: number) => boolean, reason: string): Check<number> =>
  (v) =>
    typeof v === 'number' && Number.isFinite(v) && ok(v)
      ? E.right(v)
      : fail(typeof v === 'number' ? reason : `must be a number (${reason})`);

export const finite = num(() => true, 'must be finite');
export const positive = num((x) => x > 0, 'must be > 0');
export const nonNegative = num((x) => x >= 0, 'must be >= 0');
export const openUnit = num((x) => x > 0 && x < 1, 'must be in (0, 1)');
export const unitHalfOpen = num((x) => x > 0 && x <= 1, 'must be in (0, 1]');
export const aboveOne = num((x) => x > 1, 'must be > 1');
export const integer = num(Number.isSafeInteger, 'must be an integer');
export const positiveInt = num((x) => Number.isInteger(x) && x > 0, 'must be a positive integer');
export const nonNegativeInt = num((x) => Number.isInteger(x) && x >= 0, 'must be a nonnegative integer');
export const intAtLeast = (min: number, why = ''): Check<number> =>
  num((x) => Number.isInteger(x) && x >= min, `must be an integer >= ${min}${why}`);

export const nullable =
  <T>(c: Check<T>): Check<T | null> =>
  (v) =>
    v === null ? E.right(null) : c(v);

export const bool: Check<boolean> = (v) => (typeof v === 'boolean' ? E.right(v) : fail('must be a boolean'));
export const str: Check<string> = (v) => (typeof v === 'string' ? E.right(v) : fail('must be a string'));

/** One of `values`, or an alias of one. */
export function oneOf<T extends string>(values: readonly T[], aliases: Readonly<Record<string, T>> = {}): Check<T> {
  return (v) => {
    if (typeof v === 'string') {
      if ((values as readonly string[]).includes(v)) return E.right(v as T);
      const a = aliases[v];
      if (a !== undefined) return E.right(a);
    }
    const names = [...values, ...Object.keys(aliases).filter((k) => !(values as readonly string[]).includes(k))];
    return fail(`must be one of ${names.map((n) => JSON.stringify(n)).join(', ')}`);
  };
}

/** A non-empty array whose every element passes `item`. */
export const nonEmptyArrayOf =
  <T>(item: Check<T>, what: string): Check<T[]> =>
  (v) =>
    Array.isArray(v) && v.length > 0 && v.every((x) => E.isRight(item(x)))
      ? E.right(v.map((x) => (item(x) as E.Right<T>).right))
      : fail(`must be a non-empty array of ${what}`);

/** Any plain record, unchecked (for options passed through to another parser). */
export const anyRecord: Check<Readonly<Record<string, unknown>>> = (v) =>
  typeof v === 'object' && v !== null && !Array.isArray(v)
    ? E.right(v as Record<string, unknown>)
    : fail('must be a record');

const camel = (k: string): string => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The field a caller's key names: itself, an alias, or its camelCase form. */
function resolveKey<C>(spec: Spec<C>, aliases: Aliases<C>, key: string): string | undefined {
  if (Object.hasOwn(spec, key)) return key;
  const a = aliases[key];
  if (a !== undefined) return a;
  return Object.hasOwn(spec, camel(key)) ? camel(key) : undefined;
}

/**
 * Parse a record: each given key resolved to a field and checked, the rest from `defaults`; `undefined` means
 * the default. Also returns the fields given (for defaults that follow another field).
 */
export function parseRecord<C extends object>(
  spec: Spec<C>,
  aliases: Aliases<C>,
  defaults: C,
  v: unknown,
): E.Either<Issue, [C, Set<string>]> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('must be a record');
  const out: Record<string, unknown> = { ...(defaults as Record<string, unknown>) };
  const seen = new Map<string, string>();
  for (const [key, value] of Object.entries(v as Record<string, unknown>)) {
    const field = resolveKey(spec, aliases, key);
    if (field === undefined) {
      return E.left({ path: [key], reason: `unknown field (known: ${Object.keys(spec).join(', ')})` });
    }
    const previous = seen.get(field);
    if (previous !== undefined) return E.left({ path: [key], reason: `names the same field as ${previous}` });
    seen.set(field, key);
    if (value === undefined) continue;
    const r = (spec as Record<string, Check<unknown>>)[field]!(value);
    if (E.isLeft(r)) return E.left({ path: [key, ...r.left.path], reason: r.left.reason });
    out[field] = r.right;
  }
  return E.right([out as C, new Set(seen.keys())]);
}

/**
 * A record with exactly the spec's fields, every one required and checked, no other key: for stored state (a
 * checkpoint's trainer state), where nothing may be missing or defaulted.
 */
export const exactRecord =
  <C extends object>(spec: Spec<C>): Check<C> =>
  (v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail('must be a record');
    const input = v as Record<string, unknown>;
    for (const key of Object.keys(input))
      if (!Object.hasOwn(spec, key)) return E.left({ path: [key], reason: 'is not a known field' });
    const out: Record<string, unknown> = {};
    for (const [key, check] of Object.entries(spec) as [string, Check<unknown>][]) {
      if (!Object.hasOwn(input, key)) return E.left({ path: [key], reason: 'is missing' });
      const r = check(input[key]);
      if (E.isLeft(r)) return E.left({ path: [key, ...r.left.path], reason: r.left.reason });
      out[key] = r.right;
    }
    return E.right(out as C);
  };

/** A nested record as a field's check. */
export const record =
  <C extends object>(spec: Spec<C>, aliases: Aliases<C>, defaults: C): Check<C> =>
  (v) =>
    E.map(([c]: [C, Set<string>]) => c)(parseRecord(spec, aliases, defaults, v));

/** A cross-field rule run after the fields parse: may fill in a default that depends on another field, or reject. */
export type Post<C> = (c: C, given: ReadonlySet<string>) => E.Either<Issue, C>;

/** The value at `path` in `root` (what an issue's path points at, for the error message). */
export const valueAt = (root: unknown, path: readonly string[]): unknown =>
  path.reduce<unknown>(
    (o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined),
    root,
  );

/**
 * Parse `input` (undefined: all defaults) with `spec`, then `post`; on failure, `toError(path, value, reason)`
 * builds the caller's typed error (`path` joined with '.', or `root` for the record itself).
 */
export function parseWith<C extends object, Err>(
  toError: (field: string, value: unknown, reason: string) => Err,
  spec: Spec<C>,
  aliases: Aliases<C>,
  defaults: C,
  input: unknown,
  post?: Post<C>,
  root = '(config)',
): E.Either<Err, C> {
  const raw = input === undefined ? {} : input;
  const r = parseRecord(spec, aliases, defaults, raw);
  if (E.isLeft(r)) return E.left(toError(r.left.path.join('.') || root, valueAt(raw, r.left.path), r.left.reason));
  const [c, given] = r.right;
  if (!post) return E.right(c);
  const p = post(c, given);
  return E.isLeft(p) ? E.left(toError(p.left.path.join('.'), valueAt(c, p.left.path), p.left.reason)) : p;
}
