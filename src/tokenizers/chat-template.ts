import * as E from 'fp-ts/lib/Either.js';
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { TokenizerLoadError } from './errors.js';

/**
 * The chat template of a model directory, which is code from that directory run through `@huggingface/jinja`:
 * found and parsed at load (`compileTemplate`), and every render bounded (`boundedRender`, `TEMPLATE_LIMITS`).
 * Any failure is a `TokenizerLoadError` naming the template's file.
 */
export interface ChatTemplate {
  readonly source: string;
  readonly compiled: Template;
  /** Where it came from: chat_template.jinja or tokenizer_config.json. */
  readonly file: string;
}

/**
 * The chat template (chat_template.jinja, else tokenizer_config.json's `chat_template`: a string, or a list of
 * { name, template } with a `default`), parsed. Anything else there, or a template that does not parse, is the
 * model directory's fault: a `TokenizerLoadError` naming the file.
 */
export function compileTemplate(files: {
  readonly config: Record<string, unknown>;
  readonly chatTemplate?: string;
}): E.Either<TokenizerLoadError, ChatTemplate | null> {
  const file = files.chatTemplate !== undefined ? 'chat_template.jinja' : 'tokenizer_config.json';
  const bad = (detail: string): E.Either<TokenizerLoadError, never> =>
    E.left(new TokenizerLoadError(file, 'chat_template', detail));
  let source: string | null;
  if (files.chatTemplate !== undefined) source = files.chatTemplate;
  else {
    const t = files.config.chat_template;
    if (t === undefined || t === null) source = null;
    else if (typeof t === 'string') source = t;
    else if (Array.isArray(t)) {
      const named = t.find((x: { name?: unknown }) => x?.name === 'default') as { template?: unknown } | undefined;
      if (typeof named?.template !== 'string') return bad('is a list without a "default" template');
      source = named.template;
    } else return bad(`is ${describeValue(t)}, not a template (a string, or a list of { name, template })`);
  }
  if (source === null) return E.right(null);
  if (source.length > TEMPLATE_LIMITS.sourceChars)
    return bad(`is ${source.length} characters long, above the limit of ${TEMPLATE_LIMITS.sourceChars}`);
  try {
    return E.right({ source, compiled: new Template(source), file });
  } catch (e) {
    return bad(`does not parse: ${oneLine(e)}`);
  }
}

const describeValue = (v: unknown): string => (JSON.stringify(v) ?? String(v)).slice(0, 100);
const oneLine = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 300);

/**
 * Bounds on rendering a chat template, which is code from the model directory: steps of the interpreter, wall
 * time, and the length of any string or list it builds (and so of its output). A real template renders a prompt
 * in well under a millisecond and a few thousand steps.
 *
 * Time is bounded twice: each render by `millis` (the clock is read at every step, and a list is at most `items`
 * long, so no one builtin, a `sort` say, runs long between two reads), and all the renders of one tokenizer
 * together by `millis` plus `millisPerRender` for each render (a template at 1 s a render, each under the limit,
 * otherwise turned a run rendering every prompt into minutes).
 */
export const TEMPLATE_LIMITS = {
  sourceChars: 1 << 20,
  steps: 2_000_000,
  millis: 2_000,
  millisPerRender: 10,
  length: 1 << 20,
  items: 1 << 16,
  range: 1 << 16,
} as const;

class TemplateLimitError extends Error {}

/** The budget of the render in progress (rendering is synchronous, so one at a time). */
let budget: { steps: number; deadline: number; why: string } | null = null;

// The interpreter's one entry for every node: counting there bounds steps and time; checking each value it
// returns bounds what a template can build (a string doubled in a loop). Only renders run by `boundedRender`
// are counted.
function tick(): void {
  const b = budget;
  if (b === null) return;
  if (++b.steps > TEMPLATE_LIMITS.steps)
    throw new TemplateLimitError(`took more than the limit of ${TEMPLATE_LIMITS.steps} steps`);
  if (performance.now() > b.deadline) throw new TemplateLimitError(b.why);
}
const evaluate = Interpreter.prototype.evaluate;
Interpreter.prototype.evaluate = function (this: Interpreter, ...args: Parameters<typeof evaluate>) {
  const b = budget;
  tick();
  const value = evaluate.apply(this, args);
  const inner = (value as { value?: unknown } | undefined)?.value;
  if (b !== null && typeof inner === 'string' && inner.length > TEMPLATE_LIMITS.length)
    throw new TemplateLimitError(
      `built a string of ${inner.length} characters, above the limit of ${TEMPLATE_LIMITS.length}`,
    );
  if (b !== null && Array.isArray(inner) && inner.length > TEMPLATE_LIMITS.items)
    throw new TemplateLimitError(`built a list of ${inner.length} items, above the limit of ${TEMPLATE_LIMITS.items}`);
  return value;
};

/** range() as Jinja's, refusing more than TEMPLATE_LIMITS.range numbers (the library's builds any array at once). */
function boundedRange(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range() step must not be zero');
  const n = Math.max(0, Math.ceil((to - from) / step));
  if (!(n <= TEMPLATE_LIMITS.range))
    throw new TemplateLimitError(`range() of ${n} numbers is above the limit of ${TEMPLATE_LIMITS.range}`);
  return Array.from({ length: n }, (_, i) => from + i * step);
}

// The global range() of a render in progress is the bounded one (a template's own variable named range is left
// alone): the value the library makes of a JS function, taken from a scratch environment.
const boundedRangeValue = (() => {
  const scratch = new Environment();
  scratch.set('range', boundedRange);
  return scratch.lookupVariable('range');
})();
// A for loop sets its variables once per iteration, even when its body is empty: a step too.
const setVariable = Environment.prototype.setVariable;
Environment.prototype.setVariable = function (this: Environment, ...args: Parameters<typeof setVariable>) {
  tick();
  return setVariable.apply(this, args);
};
const lookupVariable = Environment.prototype.lookupVariable;
Environment.prototype.lookupVariable = function (this: Environment, name: string) {
  if (budget !== null && name === 'range') {
    try {
      const owner = (this as unknown as { resolve(n: string): { parent?: unknown } }).resolve(name);
      if (owner.parent === undefined) return boundedRangeValue;
    } catch {
      // not declared: the library's answer (undefined)
    }
  }
  return lookupVariable.call(this, name);
};

/** The time all the renders of one tokenizer have taken, against TEMPLATE_LIMITS' total. */
export interface RenderTime {
  spent: number;
  renders: number;
}

/** Render within TEMPLATE_LIMITS; any failure (a limit, raise_exception, an error of the template) names the file. */
export function boundedRender(file: string, total: RenderTime, render: () => unknown): unknown {
  const outer = budget;
  const start = performance.now();
  const left = TEMPLATE_LIMITS.millis + total.renders * TEMPLATE_LIMITS.millisPerRender - total.spent;
  budget =
    left < TEMPLATE_LIMITS.millis
      ? {
          steps: 0,
          deadline: start + left,
          why:
            `took ${Math.round(total.spent)} ms in ${total.renders} renders, above the limit of ` +
            `${TEMPLATE_LIMITS.millis} ms plus ${TEMPLATE_LIMITS.millisPerRender} ms a render`,
        }
      : {
          steps: 0,
          deadline: start + TEMPLATE_LIMITS.millis,
          why: `ran past the limit of ${TEMPLATE_LIMITS.millis} ms`,
        };
  try {
    return render();
  } catch (e) {
    const why = e instanceof TemplateLimitError ? `rendering ${e.message}` : `fails to render: ${oneLine(e)}`;
    throw new TokenizerLoadError(file, 'chat_template', why);
  } finally {
    budget = outer;
    total.spent += performance.now() - start;
    total.renders++;
  }
}
