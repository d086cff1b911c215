import { Tensor } from './tensor.js';

/**
 * A pytree is how parameters and batches are kept: tensors nested in arrays and plain records. Non-tensor
 * leaves (numbers, strings, booleans, null) are carried through unchanged and are not differentiated.
 */
export type PyTree =
  | Tensor
  | number
  | string
  | boolean
  | null
  | undefined
  | readonly PyTree[]
  | { readonly [key: string]: PyTree };

const isRecord = (x: unknown): x is Record<string, PyTree> =>
  typeof x === 'object' && x !== null && !(x instanceof Tensor) && !Array.isArray(x);

/** The tensor leaves in a fixed order: arrays by index, records by sorted key (as JAX does for dicts). */
export function treeLeaves(tree: unknown): Tensor[] {
  const out: Tensor[] = [];
  const visit = (node: unknown): void => {
    if (node instanceof Tensor) out.push(node);
    else if (Array.isArray(node)) node.forEach(visit);
    else if (isRecord(node)) for (const k of Object.keys(node).sort()) visit(node[k]);
  };
  visit(tree);
  return out;
}

/** Rebuild `tree` with its tensor leaves replaced by `f(leaf, index)`, in `treeLeaves` order. */
export function treeMap<T>(tree: T, f: (leaf: Tensor, index: number) => Tensor): T {
  let i = 0;
  const visit = (node: unknown): unknown => {
    if (node instanceof Tensor) return f(node, i++);
    if (Array.isArray(node)) return node.map(visit);
    if (isRecord(node)) {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(node).sort()) out[k] = visit(node[k]);
      return out;
    }
    return node;
  };
  return visit(tree) as T;
}

/** Rebuild `tree` with its leaves taken in order from `leaves`. */
export function treeUnflatten<T>(tree: T, leaves: readonly Tensor[]): T {
  return treeMap(tree, (_, i) => leaves[i]!);
}

/** Combine several pytrees of the same structure leaf by leaf. */
export function treeZip<T>(trees: readonly T[], f: (leaves: Tensor[], index: number) => Tensor): T {
  const all = trees.map((t) => treeLeaves(t));
  return treeMap(trees[0]!, (_, i) =>
    f(
      all.map((ls) => ls[i]!),
      i,
    ),
  );
}
