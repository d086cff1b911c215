import * as E from 'fp-ts/lib/Either.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import type { Backend } from '../core/backend.js';
import { dispose } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { join, readRegularFile, writeFile } from '../platform/files.js';
import { fileErrorLine } from '../platform/errors.js';
import type { LoraLayer, LoraWeights } from '../nn/adapters.js';
import { layerHfName, LORA_MODULES, MODULE_WEIGHT, type LoraModule } from '../nn/parameters.js';
import { loraConfigProblem, loraScaling, moduleShape, parseTargetModules, type LoraConfig } from '../nn/lora.js';
import { CheckpointError } from './safetensors.js';
import {
  readSafetensorsIndex,
  streamTensors,
  tensorsToWrite,
  writeSafetensorsFile,
  type TensorToWrite,
} from './safetensors-file.js';
import type { TransformerConfig } from '../nn/transformer.js';

/**
 * A LoRA adapter as peft saves it (`adapter_config.json` and `adapter_model.safetensors`, which
 * `PeftModel.from_pretrained` loads): the config as peft writes it, read back refusing what this project would
 * compute otherwise, and the adapter tensors under peft's names.
 *
 * peft's tensor name of a layer's adapter matrix: the adapted weight's Hugging Face name under peft's prefix, its
 * `.weight` turned into `.lora_A.weight` or `.lora_B.weight`.
 */
export const peftName = (layer: number, module: LoraModule, which: 'A' | 'B'): string =>
  `base_model.model.${layerHfName(layer, MODULE_WEIGHT[module]).replace(/\.weight$/, `.lora_${which}.weight`)}`;

/** Every adapter tensor under its peft name (for pytrees shaped like the adapters' layers: moments too). */
export function peftNames<T>(layers: readonly { readonly [K in LoraModule]?: { a: T; b: T } }[]): Map<string, T> {
  const out = new Map<string, T>();
  layers.forEach((layer, l) => {
    for (const m of LORA_MODULES) {
      const pair = layer[m];
      if (!pair) continue;
      out.set(peftName(l, m, 'A'), pair.a);
      out.set(peftName(l, m, 'B'), pair.b);
    }
  });
  return out;
}

export const ADAPTER_FILES = { config: 'adapter_config.json', model: 'adapter_model.safetensors' } as const;

/** `adapter_config.json` as peft writes it for a LoRA adapter of a causal LM. */
export function adapterConfigJson(lora: LoraConfig, baseModel: string | null): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: baseModel,
    r: lora.r,
    lora_alpha: lora.alpha,
    lora_dropout: lora.dropout,
    target_modules: [...lora.targetModules],
    bias: 'none',
    use_rslora: lora.useRslora,
    use_dora: false,
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    revision: null,
  };
}

const bad = (field: string, detail: string): E.Either<CheckpointError, never> =>
  E.left(new CheckpointError('bad-config', field, detail, ADAPTER_FILES.config));

const emptyish = (v: unknown): boolean =>
  v === undefined || v === null || (typeof v === 'object' && Object.keys(v as object).length === 0);

/**
 * Read `adapter_config.json`: a LoRA adapter for a causal LM whose every setting this project computes the same way.
 * What it cannot (DoRA, trained biases, per-module ranks, fan_in_fan_out, extra trained modules, a layer subset) is
 * refused naming the field, never approximated.
 */
export function parseAdapterConfig(json: unknown): E.Either<CheckpointError, LoraConfig> {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return bad('adapter_config', 'is not an object');
  const j = json as Record<string, unknown>;
  if (j.peft_type !== 'LORA') return bad('peft_type', `is ${JSON.stringify(j.peft_type)}, only "LORA" is supported`);
  if (j.task_type !== undefined && j.task_type !== null && j.task_type !== 'CAUSAL_LM')
    return bad('task_type', `is ${JSON.stringify(j.task_type)}, expected "CAUSAL_LM"`);
  if ((j.bias ?? 'none') !== 'none') return bad('bias', `is ${JSON.stringify(j.bias)}, only "none" is supported`);
  // Settings that change what peft computes: refused unless off, never approximated.
  for (const f of ['use_dora', 'fan_in_fan_out', 'lora_bias'] as const)
    if (j[f] !== undefined && j[f] !== false) return bad(f, `is ${JSON.stringify(j[f])}, only false is supported`);
  const unsupported = [
    'rank_pattern',
    'alpha_pattern',
    'modules_to_save',
    'layers_to_transform',
    'layer_replication',
    'exclude_modules',
  ] as const;
  for (const f of unsupported)
    if (!emptyish(j[f])) return bad(f, `is ${JSON.stringify(j[f]).slice(0, 80)}, which is not supported`);
  // Numbers must be JSON numbers: "0.1" or [0.5] would pass JavaScript's comparisons and be written back as they are.
  for (const f of ['r', 'lora_alpha', 'lora_dropout'] as const)
    if (j[f] !== undefined && typeof j[f] !== 'number')
      return bad(f, `must be a number, got ${JSON.stringify(j[f]).slice(0, 80)}`);
  const targets = parseTargetModules(j.target_modules);
  if (E.isLeft(targets)) return bad('target_modules', targets.left);
  const useRslora = j.use_rslora ?? false;
  if (typeof useRslora !== 'boolean') return bad('use_rslora', 'must be a boolean');
  const cfg: LoraConfig = {
    r: j.r as number,
    alpha: j.lora_alpha as number,
    dropout: (j.lora_dropout ?? 0) as number,
    targetModules: targets.right,
    useRslora,
  };
  const problem = loraConfigProblem(cfg);
  if (problem) {
    const field = { r: 'r', alpha: 'lora_alpha', dropout: 'lora_dropout', targetModules: 'target_modules' }[
      problem.field as 'r' | 'alpha' | 'dropout' | 'targetModules'
    ];
    return bad(field, `${problem.why}, got ${JSON.stringify(j[field])}`);
  }
  return E.right(cfg);
}

/** The adapter tensors to write, as f32, under peft's names. */
export function adapterTensors(lora: LoraWeights): TensorToWrite[] {
  return tensorsToWrite(peftNames(lora.layers));
}

/** Write `adapter_config.json` and `adapter_model.safetensors` into `dir` (an existing directory). */
export async function writeAdapterFiles(
  dir: string,
  lora: LoraWeights,
  config: LoraConfig,
  baseModel: string | null,
): Promise<void> {
  await writeFile(
    join(dir, ADAPTER_FILES.config),
    `${JSON.stringify(adapterConfigJson(config, baseModel), null, 2)}\n`,
  );
  await writeSafetensorsFile(join(dir, ADAPTER_FILES.model), adapterTensors(lora), 'F32', { format: 'pt' });
}

/** Read and check `adapter_config.json` of an adapter directory (no tensor read yet). */
export async function readAdapterConfig(dir: string): Promise<E.Either<CheckpointError, LoraConfig>> {
  let text: string;
  try {
    text = await readRegularFile(join(dir, ADAPTER_FILES.config), 'utf8');
  } catch (e) {
    const kind = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing-file' : 'io';
    const path = join(dir, ADAPTER_FILES.config);
    return E.left(new CheckpointError(kind, ADAPTER_FILES.config, fileErrorLine(path, e), ADAPTER_FILES.config));
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return bad('adapter_config', `not valid JSON (${jsonSyntaxDetail(e)})`);
  }
  return parseAdapterConfig(json);
}

/**
 * Read a peft LoRA adapter directory for a model of `config`: its config, then every adapter tensor (by name and
 * shape; a missing, unexpected or misshapen one is a `CheckpointError` naming it), uploaded as f32.
 */
export async function readAdapter(
  dir: string,
  config: TransformerConfig,
  backend: Backend,
  opts: { readonly allowNonFinite?: boolean } = {},
): Promise<E.Either<CheckpointError, { config: LoraConfig; lora: LoraWeights }>> {
  const parsed = await readAdapterConfig(dir);
  if (E.isLeft(parsed)) return parsed;
  const lora = await readAdapterTensors(dir, parsed.right, config, backend, opts);
  return E.isLeft(lora) ? lora : E.right({ config: parsed.right, lora: lora.right });
}

/** The adapter tensors of a directory whose `adapter_config.json` was read already (`lc`), checked as `readAdapter`. */
export async function readAdapterTensors(
  dir: string,
  lc: LoraConfig,
  config: TransformerConfig,
  backend: Backend,
  opts: { readonly allowNonFinite?: boolean } = {},
): Promise<E.Either<CheckpointError, LoraWeights>> {
  const index = await readSafetensorsIndex(join(dir, ADAPTER_FILES.model));
  if (E.isLeft(index)) return index;
  const file = ADAPTER_FILES.model;
  const expected = new Map<string, number[]>();
  for (let l = 0; l < config.nLayers; l++)
    for (const m of lc.targetModules) {
      const [out, inp] = moduleShape(config, m);
      expected.set(peftName(l, m, 'A'), [lc.r, inp]);
      expected.set(peftName(l, m, 'B'), [out, lc.r]);
    }
  for (const [name, shape] of expected) {
    const e = index.right.entries.get(name);
    if (!e) return E.left(new CheckpointError('missing-tensor', name, `expected shape [${shape.join(', ')}]`, file));
    if (e.shape.length !== 2 || e.shape[0] !== shape[0] || e.shape[1] !== shape[1])
      return E.left(
        new CheckpointError('wrong-shape', name, `has shape [${e.shape.join(', ')}], expected [${shape}]`, file),
      );
    if (e.dtype === 'i32') return E.left(new CheckpointError('bad-dtype', name, 'must be a float tensor', file));
  }
  for (const name of index.right.entries.keys())
    if (!expected.has(name))
      return E.left(new CheckpointError('unexpected-tensor', name, 'is not an adapter of this model and config', file));
  const loaded = new Map<string, Tensor>();
  try {
    await streamTensors(index.right, [...expected.keys()], (name, t) => {
      if (!opts.allowNonFinite) {
        const i = t.data.findIndex((v) => !Number.isFinite(v));
        if (i >= 0) throw new CheckpointError('non-finite', name, `holds ${t.data[i]} at flat index ${i}`, file);
      }
      loaded.set(name, tensor(Float32Array.from(t.data), t.shape, { dtype: 'f32', backend }));
    });
  } catch (e) {
    dispose([...loaded.values()]);
    if (e instanceof CheckpointError) return E.left(e);
    return E.left(new CheckpointError('io', file, fileErrorLine(join(dir, file), e), file));
  }
  const layers: LoraLayer[] = Array.from({ length: config.nLayers }, (_, l) =>
    Object.fromEntries(
      lc.targetModules.map((m) => [m, { a: loaded.get(peftName(l, m, 'A'))!, b: loaded.get(peftName(l, m, 'B'))! }]),
    ),
  );
  return E.right({ scaling: loraScaling(lc), dropout: lc.dropout, layers });
}
