import * as E from 'fp-ts/lib/Either.js';
import type { RlvrError } from '../core/errors.js';
import { readAdapterConfig } from '../io/adapter-files.js';
import { CHECKPOINT_FILES } from '../io/checkpoint.js';
import { CheckpointError } from '../io/safetensors.js';
import { join, stat } from '../platform/files.js';
import { parseTrainConfig, TrainConfigError, type TrainConfig } from '../training/config.js';
import { readTrainerState, type TrainerState } from '../training/trainer-state.js';
import type { Engine, ExportLora, ExportTarget } from './export-common.js';

/**
 * What `rlvr export-config` exports: the config and the model it starts from, from the command's flags or from a
 * run directory (`--run DIR`, a run's --output), whose checkpoint records every setting of the run.
 */

/** `rlvr export-config`'s parsed arguments (args.ts `parseExportArgs`). */
export interface ExportArgs {
  readonly engine: Engine;
  /** A run directory (its --output) to read the run from, or null. */
  readonly run: string | null;
  /** The train flags' config (defaults for what is not given). */
  readonly cfg: TrainConfig;
  /** The settings the flags gave, before defaults (with --run, they replace the run's). */
  readonly given: Partial<TrainConfig>;
}

export interface Resolved {
  readonly engine: Engine;
  readonly cfg: TrainConfig;
  readonly target: ExportTarget;
}

const isDirectory = async (path: string): Promise<boolean> => {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
};

/** The records a flag sets one key of (`--lora-r` sets lora.r): the given keys go over the recorded ones. */
const RECORDS: readonly string[] = ['model', 'lora', 'objectiveOptions'];

function overlay(recorded: Readonly<Record<string, unknown>>, given: Partial<TrainConfig>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...recorded };
  for (const [key, value] of Object.entries(given)) {
    const base = out[key];
    out[key] =
      RECORDS.includes(key) && typeof base === 'object' && base !== null && typeof value === 'object' && value !== null
        ? { ...base, ...value }
        : value;
  }
  return out;
}

/** The LoRA config a run's adapter directory states (OUTPUT/adapter, written when a LoRA run ends). */
async function runAdapter(run: string): Promise<E.Either<RlvrError, ExportLora['config']>> {
  const dir = join(run, 'adapter');
  if (!(await isDirectory(dir)))
    return E.left(
      new TrainConfigError(
        '--run',
        run,
        'has no adapter/: a LoRA run writes OUTPUT/adapter when it ends (unfinished?)',
      ),
    );
  return readAdapterConfig(dir);
}

/** The config to export and the model it starts from: from `--run DIR`, or from the flags. */
export async function resolveExport(args: ExportArgs): Promise<E.Either<RlvrError, Resolved>> {
  return args.run === null ? fromFlags(args) : fromRun(args, args.run);
}

/**
 * From the flags: the model is OUTPUT/model of --output, else --model; with --adapter, --model (its base) with
 * the adapter, whose adapter_config.json says how it was made.
 */
async function fromFlags(args: ExportArgs): Promise<E.Either<RlvrError, Resolved>> {
  const { engine, cfg } = args;
  const source = 'settings from the command line';
  if (cfg.adapter !== null) {
    const config = await readAdapterConfig(cfg.adapter);
    if (E.isLeft(config)) return config;
    // The config's rules make --adapter need --model, the base it was trained on.
    const lora: ExportLora = { config: config.right, adapter: { path: cfg.adapter, flag: '--adapter' } };
    return E.right({ engine, cfg, target: { modelPath: cfg.modelDir as string, source, lora } });
  }
  const model = cfg.outputDir !== null ? join(cfg.outputDir, 'model') : cfg.modelDir;
  if (model === null)
    return E.left(new TrainConfigError('--output', null, 'is needed (or --run, or --model): the model to start from'));
  return E.right({ engine, cfg, target: { modelPath: model, source } });
}

/**
 * From a run directory: the settings its checkpoint records (a flag given replaces its setting, as when resuming
 * a run with more steps), and what the run wrote: OUTPUT/model for a full fine-tune or a merged LoRA run (LoRA
 * then trains fresh adapters of the run's rank, alpha and modules on it); the base it started from and
 * OUTPUT/adapter for an unmerged one. A run from a new model (no --model) has no Hub model an engine can load.
 */
async function fromRun(args: ExportArgs, run: string): Promise<E.Either<RlvrError, Resolved>> {
  const { engine } = args;
  const checkpoint = join(run, 'checkpoint');
  if (!(await isDirectory(checkpoint)))
    return E.left(new TrainConfigError('--run', run, "has no checkpoint/ (give a run's --output directory)"));
  const state = await readTrainerState(checkpoint);
  if (E.isLeft(state)) return state;
  const at = `${state.right.phase} step ${state.right.step}`;
  if (state.right.settings === null) return fromIdentity(args, run, state.right, at);

  const recorded = state.right.settings as Readonly<Record<string, unknown>>;
  const checked = parseTrainConfig(recorded as Partial<TrainConfig>);
  if (E.isLeft(checked))
    return E.left(
      new CheckpointError(
        'bad-state',
        `trainerState.settings.${checked.left.field}`,
        checked.left.message,
        CHECKPOINT_FILES.state,
      ),
    );
  const cfg = parseTrainConfig(overlay(recorded, args.given) as Partial<TrainConfig>);
  if (E.isLeft(cfg)) return cfg;
  const ran = checked.right;
  const flags = Object.keys(args.given).length > 0 ? '; the flags given replace them' : '';
  const source = `every setting as ${checkpoint} records it (${at})${flags}`;
  if (ran.modelDir === null)
    return E.left(
      new TrainConfigError(
        '--run',
        run,
        'trained a new model (no --model), which has no Hub tokenizer for an engine to load: ' +
          'export a run that started from a Hub model (--model)',
      ),
    );
  const model = join(run, 'model');
  if (ran.lora === null && ran.adapter === null) {
    if (!(await isDirectory(model)))
      return E.left(
        new TrainConfigError(
          '--run',
          run,
          'has no model/: a run from --model writes OUTPUT/model when it ends (unfinished?)',
        ),
      );
    return E.right({ engine, cfg: cfg.right, target: { modelPath: model, source, lora: null } });
  }
  const config = await runAdapter(run);
  if (E.isLeft(config)) return config;
  if (ran.mergeLora && (await isDirectory(model)))
    return E.right({
      engine,
      cfg: cfg.right,
      target: {
        modelPath: model,
        source: `${source}; LoRA merged into ${model}`,
        lora: { config: config.right, adapter: null },
      },
    });
  const adapter = { path: join(run, 'adapter'), flag: '--run' };
  return E.right({
    engine,
    cfg: cfg.right,
    target: { modelPath: ran.modelDir, source, lora: { config: config.right, adapter } },
  });
}

/**
 * A checkpoint written before runs recorded their settings: its identity (objective, options, advantage, BICC,
 * task), the rest from the command line, and DIR/model.
 */
async function fromIdentity(
  args: ExportArgs,
  run: string,
  state: TrainerState,
  at: string,
): Promise<E.Either<RlvrError, Resolved>> {
  const id = state.identity;
  const model = join(run, 'model');
  if (!(await isDirectory(model)))
    return E.left(
      new TrainConfigError(
        '--run',
        run,
        'has no model/ directory (a run started from --model writes one when it ends)',
      ),
    );
  const cfg: TrainConfig = {
    ...args.cfg,
    task: id.task as TrainConfig['task'],
    digits: id.digits,
    objective: id.objective as TrainConfig['objective'],
    objectiveOptions: id.objectiveConfig as TrainConfig['objectiveOptions'],
    advantage: id.advantage as TrainConfig['advantage'],
    rccDelta: id.rccDelta as TrainConfig['rccDelta'],
    bicc: id.bicc,
  };
  const source =
    `objective, options, advantage and BICC from ${join(run, 'checkpoint')} (${at}), which records no other ` +
    'setting (written before runs recorded them); the rest from the command line';
  return E.right({ engine: args.engine, cfg, target: { modelPath: model, source } });
}
