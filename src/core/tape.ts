import type { Tensor } from './tensor.js';
import { ShapeError } from './errors.js';

/**
 * Reverse-mode autodiff over a tape. While a function is traced, every op whose inputs include a tensor tracked
 * by an active tape is recorded on it as a node (inputs, output, vector-Jacobian rule). Backpropagation visits
 * the nodes once each in reverse topological order (found by an iterative depth-first search, so diamonds cost
 * linear time and 10,000-op chains do not overflow the stack).
 *
 * Tapes nest: ops run while backpropagating one tape are recorded on the tapes outside it, which is what makes
 * `grad(grad(f))` work.
 */
export type VjpRule = (
  cotangent: Tensor,
  needs: readonly boolean[],
  /**
   * The cotangent each input has gathered so far from the ops already visited (null: none yet, or not needed, or
   * the input's second place in this op's inputs). A rule may fold it into its own kernel, saving the tape's add:
   * it then returns `absorbed(t)` with t = prior[i] + its own cotangent for input i. Rules that ignore it lose
   * nothing; the tape adds their result to what was gathered.
   */
  prior: readonly (Tensor | null)[],
) => readonly (Tensor | null)[];

const absorbing = new WeakSet<Tensor>();

/**
 * Mark a rule's result for input i as already holding `prior[i]` (the cotangent gathered before), so the tape
 * takes it as the input's new total instead of adding it (a fused accumulation: one kernel, not two).
 */
export function absorbed(t: Tensor): Tensor {
  absorbing.add(t);
  return t;
}

interface Node {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  readonly output: Tensor;
  readonly vjp: VjpRule;
}

let nextTapeId = 1;

export class Tape {
  readonly id = nextTapeId++;
  private readonly tracked = new Set<number>();
  private readonly producers = new Map<number, Node>();
  private readonly held: Tensor[] = [];

  isTracked(t: Tensor): boolean {
    return this.tracked.has(t.id);
  }

  /** Mark a leaf (an input being differentiated). */
  watch(t: Tensor): void {
    this.tracked.add(t.id);
  }

  /** @internal */
  maybeRecord(op: string, inputs: readonly Tensor[], output: Tensor, vjp: VjpRule): void {
    if (!inputs.some((x) => this.tracked.has(x.id))) return;
    this.tracked.add(output.id);
    this.producers.set(output.id, { op, inputs, output, vjp });
    for (const t of inputs) this.hold(t);
    this.hold(output);
  }

  private hold(t: Tensor): void {
    t.retain();
    this.held.push(t);
  }

  /**
   * Cotangents of `leaves` given the cotangent of `output`. Leaves the output does not depend on get null.
   * Intermediate cotangents are left to the caller's tidy scope.
   */
  backward(
    roots: readonly (readonly [output: Tensor, cotangent: Tensor])[],
    leaves: readonly Tensor[],
  ): (Tensor | null)[] {
    const grads = new Map<number, Tensor>();
    for (const [output, cotangent] of roots) {
      if (!this.isTracked(output)) continue;
      const prev = grads.get(output.id);
      grads.set(output.id, prev ? accumulate(prev, cotangent) : cotangent);
    }
    const order = this.topologicalOrder(roots.map(([output]) => output));
    for (let n = order.length - 1; n >= 0; n--) {
      const node = order[n]!;
      const g = grads.get(node.output.id);
      if (!g) continue;
      const needs = node.inputs.map((x) => this.tracked.has(x.id));
      // An input that appears twice is offered its gathered cotangent once, at its first place.
      const prior = node.inputs.map((x, i) =>
        needs[i] && node.inputs.indexOf(x) === i ? (grads.get(x.id) ?? null) : null,
      );
      const inGrads = node.vjp(g, needs, prior);
      // Every mark is taken off here, used or not, so none outlives the rule that made it.
      const marked = inGrads.map((t) => (t ? absorbing.delete(t) : false));
      node.inputs.forEach((x, i) => {
        const gi = inGrads[i];
        if (!needs[i] || !gi) return;
        if (gi.shape.length !== x.shape.length || gi.shape.some((d, k) => d !== x.shape[k])) {
          throw new ShapeError(`${node.op} (vjp)`, [gi.shape, x.shape], 'cotangent shape differs from its input');
        }
        const folded = marked[i]! && prior[i] !== null;
        const prev = grads.get(x.id);
        grads.set(x.id, prev && !folded ? accumulate(prev, gi) : gi);
      });
    }
    return leaves.map((l) => grads.get(l.id) ?? null);
  }

  /** Nodes reachable from the outputs, inputs before the ops that use them. Iterative: no recursion depth limit. */
  private topologicalOrder(outputs: readonly Tensor[]): Node[] {
    const order: Node[] = [];
    const visited = new Set<number>();
    const stack: { node: Node; next: number }[] = [];
    for (const output of outputs) {
      const start = this.producers.get(output.id);
      if (!start || visited.has(output.id)) continue;
      visited.add(output.id);
      stack.push({ node: start, next: 0 });
      this.depthFirst(stack, visited, order);
    }
    return order;
  }

  private depthFirst(stack: { node: Node; next: number }[], visited: Set<number>, order: Node[]): void {
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      if (frame.next < frame.node.inputs.length) {
        const input = frame.node.inputs[frame.next++]!;
        const producer = this.producers.get(input.id);
        if (producer && !visited.has(input.id)) {
          visited.add(input.id);
          stack.push({ node: producer, next: 0 });
        }
      } else {
        order.push(frame.node);
        stack.pop();
      }
    }
  }

  /** Release every reference the tape holds. */
  dispose(): void {
    for (const t of this.held) t.release();
    this.held.length = 0;
    this.producers.clear();
  }
}

const activeTapes: Tape[] = [];

/** @internal Record an op on every active tape that tracks one of its inputs. */
export function recordOp(op: string, inputs: readonly Tensor[], output: Tensor, vjp: VjpRule): void {
  for (const tape of activeTapes) tape.maybeRecord(op, inputs, output, vjp);
}

/** @internal Whether an active tape tracks t (an op that writes into t's storage must not, then). */
export const trackedByActiveTape = (t: Tensor): boolean => activeTapes.some((tape) => tape.isTracked(t));

/** Run `fn` with `tape` active. */
export function withTape<T>(tape: Tape, fn: () => T): T {
  activeTapes.push(tape);
  try {
    return fn();
  } finally {
    const i = activeTapes.lastIndexOf(tape);
    if (i >= 0) activeTapes.splice(i, 1);
  }
}

/** Run `fn` with no tape recording (gradients of what it computes are not tracked). */
export function withoutTapes<T>(fn: () => T): T {
  const saved = activeTapes.splice(0, activeTapes.length);
  try {
    return fn();
  } finally {
    activeTapes.push(...saved);
  }
}

let accumulateFn: ((a: Tensor, b: Tensor) => Tensor) | null = null;
/** @internal The op layer registers `add` here (the tape cannot import the ops without a cycle). */
export function setAccumulate(f: (a: Tensor, b: Tensor) => Tensor): void {
  accumulateFn = f;
}
function accumulate(a: Tensor, b: Tensor): Tensor {
  if (!accumulateFn) throw new Error('internal: accumulate not registered');
  return accumulateFn(a, b);
}
