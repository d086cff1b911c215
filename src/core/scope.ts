import { ArgumentError } from './errors.js';
import { treeLeaves } from './pytree.js';
import { closeScope, innermostScope, openScope, trackInScope } from './scope-stack.js';

/**
 * Memory lifetimes, as in tfjs (any pytree may be returned or disposed; see pytree.ts): `tidy(fn)` disposes every tensor created inside `fn` except the tensors it
 * returns (which move to the enclosing scope). Outside any scope, the creator owns a tensor and disposes it.
 * On the CPU an undisposed tensor is only garbage; on WebGPU it is a GPU buffer that stays allocated.
 * The scope stack itself is `scope-stack.ts`.
 */
export function tidy<T>(fn: () => T): T {
  const scope = openScope();
  let result: T;
  try {
    result = fn();
  } catch (e) {
    closeScope();
    for (const t of scope) t.dispose();
    throw e;
  }
  closeScope();
  if (result instanceof Promise) {
    // Free what the synchronous part made before refusing; the async rest is the caller's bug to fix.
    for (const t of scope) t.dispose();
    throw new ArgumentError('tidy', 'the function returned a Promise; tidy scopes are synchronous');
  }
  const kept = new Set<unknown>(treeLeaves(result));
  for (const t of scope) {
    if (kept.has(t)) trackInScope(t);
    else t.dispose();
  }
  return result;
}

/** Exempt tensors from the innermost scope's cleanup: the caller takes ownership. */
export function keep<T>(tree: T): T {
  const scope = innermostScope();
  if (scope) for (const t of treeLeaves(tree)) scope.delete(t);
  return tree;
}

/** Dispose every tensor in a pytree. */
export function dispose(tree: unknown): void {
  for (const t of treeLeaves(tree)) t.dispose();
}
