import { ArgumentError, BackendMismatchError, DTypeError, ShapeError } from '../../core/errors.js';
import { treeLeaves, treeMap, type PyTree } from '../../core/pytree.js';
import { dispose, tidy } from '../../core/scope.js';
import { Tensor } from '../../core/tensor.js';
import type { RecordedStep } from '../../core/backend.js';
import type { GpuBackend } from './runtime.js';
import { RecordingError } from './errors.js';
import type { Recording } from './recording.js';
import { asStorage, bufferOf } from './storage.js';

/**
 * A function of tensors recorded once on the WebGPU backend and replayed (`recordStep`), as a CUDA graph is:
 * each `run` copies its inputs into the recording's input slots, encodes the recorded dispatches with their
 * pipelines and bind groups, and copies the outputs into new tensors, except an output the function wrote into
 * its own input (lent: see `recordStep`). No op, tape or kernel selection runs again, so the host's cost is Dawn's
 * encoding calls alone.
 */
export type { RecordedStep };

const bytesOf = (t: Tensor): number => Math.ceil(t.bytes / 4) * 4;

/** An input leaf named by its place in `treeLeaves` order. */
const leafName = (i: number, n: number): string => `inputs leaf ${i} (of ${n}, in treeLeaves order)`;

/**
 * Record `fn` on `backend` by running it once on `example` (its result is discarded), and return a step that
 * replays it. `fn` must be a function of its inputs' values alone, with no read back to the host inside
 * (`RecordingError`); what it computes from host values (a batch's masks, a schedule's learning rate, the
 * shapes) is frozen at recording: pass whatever changes between runs as an input tensor (`batchTensors`,
 * `adamwScheduleValues`). A tensor it reads without being given it (a table cached across calls) is read as it is
 * at each run, and kept from the pool until the step is disposed. Run it warmed: the kernels' tuned configurations
 * are the ones in use at recording.
 *
 * An output the function wrote into an input's own storage (AdamW with `donate`) is not copied: it is lent, the
 * input's slot itself. Passed back as the next run's input in the same place, it is taken back (consumed: a later
 * use throws `DonatedTensorError`), so a training loop's weights never move; a run that would overwrite a lent
 * tensor still alive, or one shared by a view, throws `RecordingError` before it consumes anything.
 *
 * Memory: the step keeps every buffer the run used (inputs' slots, intermediates as the pool reused them, outputs)
 * until `dispose`, about one run's working set.
 */
export function recordStep<I extends PyTree, O extends PyTree>(
  backend: GpuBackend,
  fn: (inputs: I) => O,
  example: I,
): RecordedStep<I, O> {
  const rt = backend.runtime;
  if (rt.recording) throw new RecordingError('a step is already being recorded on this backend');
  const given = treeLeaves(example);
  const check = (leaves: readonly Tensor[], what: string): void => {
    leaves.forEach((t, i) => {
      if (t.backend !== backend)
        throw new BackendMismatchError(`recordStep: ${what} ${i}`, [t.backend.name, backend.name]);
      t.storageFor(`recordStep (${what} ${i})`);
    });
  };
  check(given, 'input');
  const slots = given.map((t) => {
    const slot = rt.alloc(bytesOf(t));
    rt.copy(bufferOf(t.storageFor('recordStep')), slot, bytesOf(t));
    return Tensor.fromStorage(backend, asStorage(slot), t.shape, t.dtype);
  });
  const slotBuffers = slots.map((t) => bufferOf(t.storageFor('recordStep')));
  rt.beginRecording();
  try {
    const out = tidy(() => fn(treeMap(example, (_, i) => slots[i]!)));
    const leaves = treeLeaves(out);
    check(leaves, 'output');
    // An output the function wrote into an input's own storage (AdamW with `donate`) lives in that input's slot:
    // it is lent, not copied (the first such output of each slot).
    const lendable = new Set(slotBuffers);
    const outputs = leaves.map((t) => {
      const buffer = bufferOf(t.storageFor('recordStep'));
      return [buffer, bytesOf(t), lendable.delete(buffer)] as const;
    });
    const recording = rt.endRecording([...slotBuffers, ...outputs.map(([b]) => b)]);
    // The run's own tensors go (their buffers stay held); `out` keeps the structure, shapes and dtypes.
    dispose(out);
    dispose(slots);
    return makeStep(backend, recording, given, slotBuffers, outputs, out);
  } catch (e) {
    if (rt.recording) rt.abortRecording();
    dispose(slots);
    throw e;
  }
}

function makeStep<I extends PyTree, O extends PyTree>(
  backend: GpuBackend,
  recording: Recording,
  given: readonly Tensor[],
  slots: readonly GPUBuffer[],
  outputs: readonly (readonly [GPUBuffer, number, boolean])[],
  /** The recording run's outputs (disposed): the structure, shapes and dtypes of every run's. */
  skeleton: O,
): RecordedStep<I, O> {
  const rt = backend.runtime;
  const want = given.length;
  return {
    dispatches: recording.dispatches,
    run(inputs: I): O {
      if (recording.dropped) throw new RecordingError('run after dispose');
      const leaves = treeLeaves(inputs);
      if (leaves.length !== want)
        throw new ArgumentError('recordStep run', `${leaves.length} input tensors, the recording has ${want}`);
      const copies: (readonly [GPUBuffer, GPUBuffer, number])[] = [];
      const takenBack = new Set<Tensor>();
      leaves.forEach((t, i) => {
        const { shape, dtype } = given[i]!;
        const name = `recordStep run: ${leafName(i, want)}`;
        if (t.backend !== backend) throw new BackendMismatchError(name, [t.backend.name, backend.name]);
        if (t.shape.length !== shape.length || t.shape.some((d, k) => d !== shape[k]))
          throw new ShapeError(name, [t.shape, shape], 'not the shape it was recorded with');
        if (t.dtype !== dtype) throw new DTypeError(name, `${t.dtype}, recorded as ${dtype}`);
        const buffer = bufferOf(t.storageFor('recordStep run'));
        if (buffer === slots[i]) {
          // A lent output given back in its own place: already in the slot, and this run overwrites it.
          if (!t.uniquelyOwned)
            throw new RecordingError(`${name} was lent by the last run and is shared (a view or a tape holds it)`);
          takenBack.add(t);
        } else {
          if (rt.pool.heldAndLive(slots[i]!))
            throw new RecordingError(
              `${name}: the tensor the last run lent in its place is still alive; pass it back here or dispose it`,
            );
          copies.push([buffer, slots[i]!, bytesOf(t)]);
        }
      });
      for (const t of takenBack) t.consume('recordStep run');
      const out = rt.replay(recording, copies, outputs);
      return treeMap(skeleton, (t, i) => Tensor.fromStorage(backend, asStorage(out[i]!), t.shape, t.dtype));
    },
    dispose(): void {
      rt.dropRecording(recording);
    },
  };
}
