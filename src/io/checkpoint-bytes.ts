import * as E from 'fp-ts/lib/Either.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import * as TE from 'fp-ts/lib/TaskEither.js';
import { pipe } from 'fp-ts/lib/function.js';
import { FORMAT, hostTensors, parseState, type Checkpoint, type SavedState } from './checkpoint.js';
import { fromHfConfig, fromHfNames, toHfConfig, toHfNames, type LoadOptions } from './hf.js';
import type { OptimizerState } from '../nn/optim.js';
import { CheckpointError, decodeSafetensors, encodeSafetensors, type HostTensor } from './safetensors.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';

/**
 * A checkpoint as one safetensors file in memory, for a page (download, upload) or any store of bytes; the
 * directory form (`saveCheckpoint`) stays Node's. The file holds the tensors of the directory's
 * `model.safetensors` (Hugging Face Llama names) and, with an optimizer, those of `optimizer.safetensors`
 * (`exp_avg.<name>`, `exp_avg_sq.<name>`); its `__metadata__` holds the JSON of `config.json` under `config`, of
 * `trainer_state.json` under `trainer_state`, and the optimizer step under `step`. Reading validates as the
 * directory loader does and answers with a `CheckpointError` naming the bad field or tensor.
 */
const MOMENTS = ['exp_avg.', 'exp_avg_sq.'] as const;

export function checkpointToBytes(ckpt: Checkpoint): TE.TaskEither<CheckpointError, Uint8Array> {
  return TE.tryCatch(
    async () => {
      const tensors = await hostTensors(toHfNames(ckpt.params));
      if (ckpt.optimizer) {
        for (const [name, t] of await hostTensors(toHfNames(ckpt.optimizer.m), MOMENTS[0])) tensors.set(name, t);
        for (const [name, t] of await hostTensors(toHfNames(ckpt.optimizer.v), MOMENTS[1])) tensors.set(name, t);
      }
      const torchDtype = ckpt.params.embed.weight.dtype === 'f64' ? 'float64' : 'float32';
      const metadata: Record<string, string> = {
        format: 'pt',
        producer: FORMAT,
        config: JSON.stringify({ ...toHfConfig(ckpt.config), torch_dtype: torchDtype }),
        trainer_state: JSON.stringify({
          format: FORMAT,
          rngs: ckpt.rngs ?? {},
          trainerState: ckpt.trainerState ?? null,
        }),
        ...(ckpt.optimizer ? { step: String(ckpt.optimizer.step) } : {}),
      };
      return encodeSafetensors(tensors, metadata);
    },
    (e) => new CheckpointError('io', 'checkpoint', e instanceof Error ? e.message : String(e)),
  );
}

/** `checkpointToBytes` as a Blob, ready for a download link (`URL.createObjectURL`). */
export const checkpointToBlob = (ckpt: Checkpoint): TE.TaskEither<CheckpointError, Blob> =>
  pipe(
    checkpointToBytes(ckpt), // encodeSafetensors allocates a plain (not shared) ArrayBuffer.
    TE.map((bytes) => new Blob([bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' })),
  );

const jsonField = (metadata: Readonly<Record<string, string>>, field: string): E.Either<CheckpointError, unknown> => {
  const text = metadata[field];
  if (text === undefined) return E.left(new CheckpointError('bad-header', `__metadata__.${field}`, 'is missing'));
  return E.tryCatch(
    () => JSON.parse(text) as unknown,
    (e) => new CheckpointError('bad-header', `__metadata__.${field}`, `is not valid JSON (${jsonSyntaxDetail(e)})`),
  );
};

function optimizerFrom(
  moments: ReadonlyMap<string, HostTensor>,
  metadata: Readonly<Record<string, string>>,
  config: TransformerConfig,
  opts: LoadOptions,
): E.Either<CheckpointError, OptimizerState<TransformerParams> | null> {
  if (moments.size === 0) return E.right(null);
  const step = Number(metadata.step);
  if (metadata.step === undefined || !Number.isSafeInteger(step) || step < 0) {
    return E.left(
      new CheckpointError(
        'bad-state',
        '__metadata__.step',
        `expected a step count, got ${JSON.stringify(metadata.step)}`,
      ),
    );
  }
  return pipe(
    E.Do,
    E.bind('m', () => fromHfNames(moments, config, { ...opts, prefix: MOMENTS[0] })),
    E.bind('v', () => fromHfNames(moments, config, { ...opts, prefix: MOMENTS[1] })),
    E.map(({ m, v }) => ({ step, m, v })),
  );
}

/** Read a checkpoint written by `checkpointToBytes` (bytes, an ArrayBuffer, or a Blob such as an uploaded File). */
export function checkpointFromBytes(
  input: Uint8Array | ArrayBuffer | Blob,
  opts: LoadOptions = {},
): TE.TaskEither<CheckpointError, Checkpoint> {
  const bytes = TE.tryCatch(
    async () =>
      input instanceof Uint8Array
        ? input
        : new Uint8Array(input instanceof ArrayBuffer ? input : await input.arrayBuffer()),
    (e) => new CheckpointError('io', 'checkpoint', e instanceof Error ? e.message : String(e)),
  );
  return pipe(
    bytes,
    TE.chainEitherK((b) =>
      pipe(
        decodeSafetensors(b),
        E.bindTo('file'),
        E.bind('config', ({ file }) => pipe(jsonField(file.metadata, 'config'), E.chain(fromHfConfig))),
        E.bind('state', ({ file }) =>
          file.metadata.trainer_state === undefined
            ? E.right<CheckpointError, SavedState>({ rngs: {}, trainerState: null })
            : pipe(jsonField(file.metadata, 'trainer_state'), E.chain(parseState)),
        ),
        E.bind('split', ({ file }) => {
          const model = new Map<string, HostTensor>();
          const moments = new Map<string, HostTensor>();
          for (const [name, t] of file.tensors)
            (MOMENTS.some((p) => name.startsWith(p)) ? moments : model).set(name, t);
          return E.right({ model, moments });
        }),
        E.bind('params', ({ config, split }) => fromHfNames(split.model, config, opts)),
        E.bind('optimizer', ({ file, config, split }) => optimizerFrom(split.moments, file.metadata, config, opts)),
        E.map(({ config, params, optimizer, state }) => ({
          config,
          params,
          ...(optimizer ? { optimizer } : {}),
          rngs: state.rngs,
          trainerState: state.trainerState,
        })),
      ),
    ),
  );
}
