import { expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { compareForward, describeGpu, EXACT, intsFor, RUNS, shapeArb, valuesFor, type Arg } from './helpers.js';

/**
 * Movement kernels (one strided word copy) against the CPU backend: expand, permute, slice, pad, concat, in f32
 * and i32. They move bits, so the tolerance is exact.
 */
const withValues = (s: number[]): fc.Arbitrary<Arg> => valuesFor(s);

describeGpu('webgpu movement (exact: data is only moved)', (gpu) => {
  it('expand to a broadcast shape (size-1 axes and new leading axes)', async () => {
    const arb = shapeArb(0, 4, 5).chain((out) =>
      fc
        .tuple(
          fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length }),
          fc.integer({ min: 0, max: out.length }),
        )
        .chain(([ones, drop]) =>
          fc.tuple(fc.constant(out), withValues(out.map((d, i) => (ones[i] ? 1 : d)).slice(drop))),
        ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([out, a]) => compareForward('expand', [a], ([x]) => T.expand(x!, out), EXACT, gpu)),
      RUNS,
    );
  });

  it('permute by a random permutation (f32 and i32)', async () => {
    const arb = shapeArb(1, 5, 6).chain((s) =>
      fc.tuple(
        withValues(s),
        intsFor(s, -99, 99),
        fc.shuffledSubarray([...s.keys()], { minLength: s.length, maxLength: s.length }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([a, i, perm]) =>
        compareForward('permute', [a, i], ([x, y]) => [T.permute(x!, perm), T.permute(y!, perm)], EXACT, gpu),
      ),
      RUNS,
    );
  });

  it('slice a random box', async () => {
    const arb = shapeArb(1, 4, 7).chain((s) =>
      fc.tuple(
        withValues(s),
        fc.tuple(
          ...s.map((d) =>
            fc
              .integer({ min: 0, max: d - 1 })
              .chain((b) => fc.tuple(fc.constant(b), fc.integer({ min: 0, max: d - b }))),
          ),
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([a, box]) =>
        compareForward(
          'slice',
          [a],
          ([x]) =>
            T.slice(
              x!,
              box.map(([b]) => b),
              box.map(([, n]) => n),
            ),
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });

  it('pad into a larger shape at a random offset', async () => {
    const arb = shapeArb(1, 4, 5).chain((s) =>
      fc.tuple(
        withValues(s),
        fc.tuple(...s.map(() => fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 })))),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([a, pads]) =>
        compareForward(
          'pad',
          [a],
          ([x]) =>
            T.pad(
              x!,
              pads.map(([b]) => b),
              a.shape.map((d, i) => d + pads[i]![0] + pads[i]![1]),
            ),
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });

  it('concat 1-4 tensors along a random axis', async () => {
    const arb = shapeArb(1, 4, 5).chain((s) =>
      fc.integer({ min: 0, max: s.length - 1 }).chain((axis) =>
        fc.tuple(
          fc.constant(axis),
          fc.array(
            fc.integer({ min: 1, max: 4 }).chain((n) => withValues(s.map((d, i) => (i === axis ? n : d)))),
            { minLength: 1, maxLength: 4 },
          ),
        ),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([axis, parts]) => compareForward('concat', parts, (xs) => T.concat(xs, axis), EXACT, gpu)),
      RUNS,
    );
  });

  it('transpose and stack/split round trips', async () => {
    const arb = shapeArb(2, 3, 6).chain(withValues);
    await fc.assert(
      fc.asyncProperty(arb, (a) =>
        compareForward(
          'transpose/stack/split',
          [a],
          ([x]) => [T.transpose(x!), T.stack([x!, x!], 1), ...T.split(x!, [1, a.shape[0]! - 1], 0)],
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
});

describeGpu('webgpu updateSlice (exact)', (gpu) => {
  /** A destination shape, an update that fits in it, where it goes, and both tensors' values. */
  const arb = shapeArb(1, 4, 5).chain((shape) =>
    fc
      .tuple(...shape.map((n) => fc.integer({ min: 1, max: n })))
      .chain((sub) =>
        fc.tuple(
          fc.tuple(...shape.map((n, a) => fc.integer({ min: 0, max: n - sub[a]! }))),
          withValues(shape),
          withValues(sub),
        ),
      ),
  );

  it('in place when the donated tensor is the only reference (its storage reused), as the CPU', async () => {
    await fc.assert(
      fc.asyncProperty(arb, ([begin, dst, src]) =>
        compareForward(
          'updateSlice in place',
          [dst, src],
          ([d, s]) => {
            const storage = d!.storageFor('spec');
            const y = T.updateSlice(d!, s!, begin);
            expect(y.storageFor('spec'), 'the donated storage is reused').toBe(storage);
            return y;
          },
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });

  it('a copy when a view shares the storage: the view keeps the old values, as the CPU', async () => {
    await fc.assert(
      fc.asyncProperty(arb, ([begin, dst, src]) =>
        compareForward(
          'updateSlice copy',
          [dst, src],
          ([d, s]) => {
            const view = T.reshape(d!, [...d!.shape, 1]);
            const y = T.updateSlice(d!, s!, begin);
            expect(y.storageFor('spec')).not.toBe(view.storageFor('spec'));
            return [y, view];
          },
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
});
