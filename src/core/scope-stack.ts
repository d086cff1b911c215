/**
 * The open `tidy` scopes, innermost last: the part of `scope.ts` that `Tensor` needs (its constructor adds each
 * new tensor to the innermost scope). Kept apart, and typed by what a scope does with its members, so that
 * tensor.ts imports neither `tidy` nor the pytree walk `tidy` uses, which imports `Tensor`.
 */
export interface Scoped {
  dispose(): void;
}

const scopes: Set<Scoped>[] = [];

/** @internal Called by every tensor constructor. */
export function trackInScope(t: Scoped): void {
  scopes[scopes.length - 1]?.add(t);
}

/** Open a scope: what is made until `closeScope` is tracked in it. */
export function openScope(): Set<Scoped> {
  const scope = new Set<Scoped>();
  scopes.push(scope);
  return scope;
}

/** Close the innermost scope (the one the last `openScope` returned); its members are the caller's to settle. */
export function closeScope(): void {
  scopes.pop();
}

/** The innermost open scope, if any. */
export function innermostScope(): Set<Scoped> | undefined {
  return scopes[scopes.length - 1];
}
