import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { parquetMetadata, parquetSchema, type SchemaTree } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATA_DIR, DATA_EXPORTS, DATA_FILE_NAMES, readParquetRows, rowsJson } from '../../examples/golden/verl-data.js';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { boxed } from '../../src/tasks/boxed.js';
import { verifyBoxed } from '../../src/tasks/dataset.js';
import { splitOf, type Problem, type Task } from '../../src/tasks/task.js';
import { loadHfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import type { TrainConfig } from '../../src/training/config.js';
import { loadDatasetTask } from '../../src/training/pretrained.js';
import { taskFor } from '../../src/training/run.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { cliBundle, rlvrSync } from '../robustness/helpers/cli.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * `rlvr export-data`: the files hold the prompts `rlvr train` uses, as a real run shows them (its first RL step's
 * prompts and the held-out prompts it verifies), with ground truths the task's verifier scores 1, in verl's layout
 * (a list<struct> prompt, struct reward_model and extra_info) as hyparquet reads it back; bad input is one line with
 * its exit status, and nothing the command reads is replaced. python/tests/data is what the command writes now.
 */

interface Row {
  data_source: string;
  prompt: { role: string; content: string }[];
  ability: string;
  reward_model: { style: string; ground_truth: string };
  extra_info: { split: string; index: number; line: number | null };
}

const bundle = cliBundle('export-data');
const dirs: string[] = [];
const tempDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'rlvr-export-data-'));
  dirs.push(d);
  return d;
};
const cpu = new CpuBackend();

beforeAll(bundle.build, 120_000);
afterAll(() => {
  bundle.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  cpu.dispose();
});

const cli = (args: readonly string[]) => rlvrSync(bundle.path, ['export-data', ...args]);

async function exported(args: readonly string[]): Promise<{ train: Row[]; test: Row[]; stdout: string }> {
  const out = tempDir();
  const r = cli([...args, '--output', out]);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  const [train, test] = await Promise.all(DATA_FILE_NAMES.map((f) => readParquetRows(join(out, f))));
  return { train: train as unknown as Row[], test: test as unknown as Row[], stdout: r.stdout };
}

const contents = (rows: readonly Row[]): string[] => rows.map((r) => r.prompt[0]!.content);

/** The task with its verifier recording each problem it is asked about, in order. */
function recording(task: Task<Problem>, seen: string[]): Task<Problem> {
  const verify = (completion: string, p: Problem): number => {
    seen.push(p.prompt);
    return task.verify(completion, p);
  };
  return { ...task, verify };
}

/**
 * What a training run shows of its prompts: its first RL step's, and the held-out prompts its first evaluation
 * verifies, in order (evaluation verifies each prompt's greedy completion first; RL and the warm-start's
 * validation only ever see training prompts).
 */
async function trainingPrompts(
  cfg: TrainConfig,
  task: Task<Problem>,
): Promise<{ firstStep: string[]; heldOut: string[] }> {
  const seen: string[] = [];
  const firstStep: string[] = [];
  await train(cfg, {
    backend: cpu,
    task: recording(task, seen),
    keepRecords: 0,
    onWarning: () => undefined,
    onRollouts: (v) => {
      if (v.step === 1) firstStep.push(...v.prompts);
    },
  });
  return { firstStep, heldOut: seen.filter((p) => splitOf(p) === 'test').slice(0, cfg.evalPrompts) };
}

function expectVerlRow(row: Row, split: 'train' | 'test', index: number, source: string): void {
  expect(row.data_source).toBe(source);
  expect(row.reward_model.style).toBe('rule');
  expect(row.prompt).toHaveLength(1);
  expect(row.prompt[0]!.role).toBe('user');
  expect(row.extra_info.split).toBe(split);
  expect(row.extra_info.index).toBe(index);
  expect(splitOf(row.prompt[0]!.content)).toBe(split);
}

describe('rlvr export-data', () => {
  it('a built-in task: the prompts and chat text rlvr train uses, ground truths its verifier scores 1', async () => {
    const args = ['--task', 'addition', '--digits', '3', '--seed', '11', '--prompts-per-step', '4'];
    const { train: rows, test, stdout } = await exported([...args, '--steps', '3', '--eval-prompts', '12']);
    expect(stdout).toContain('12 training prompts (addition, digits 3, seed 11)');
    expect(rows).toHaveLength(12);
    expect(test).toHaveLength(12);
    const task = taskFor(tinyRun({ task: 'addition', digits: 3 }));
    for (const [split, list] of [
      ['train', rows],
      ['test', test],
    ] as const)
      list.forEach((row, i) => {
        expectVerlRow(row, split, i, 'rlvr/addition');
        expect(row.ability).toBe('math');
        expect(row.extra_info.line).toBeNull();
        // The ground truth from the prompt's own numbers, and what the task's verifier makes of it.
        const m = /^(\d{3})\+(\d{3})=$/.exec(row.prompt[0]!.content);
        expect(m, row.prompt[0]!.content).not.toBeNull();
        const truth = row.reward_model.ground_truth;
        expect(truth).toBe(String(Number(m![1]) + Number(m![2])));
        const problem = { prompt: row.prompt[0]!.content, answer: truth };
        expect(task.verify(`so ${boxed(truth)}`, problem)).toBe(1);
        expect(task.verify(`so ${boxed(`${truth}1`)}`, problem)).toBe(0);
      });
    const trainSet = new Set(contents(rows));
    expect(contents(test).filter((p) => trainSet.has(p))).toEqual([]);

    // A run of the same settings from a Hub model (whose stream of prompts starts at the seed): its first step's
    // prompts open the exported training prompts, and it evaluates exactly the exported held-out prompts.
    const model = await tinyHubDir();
    dirs.push(model);
    const cfg = parseTrainArgs([
      ...['--model', model, ...args, '--steps', '1', '--eval-prompts', '12', '--eval-k', '1', '--eval-every', '0'],
      ...['--num-generations', '2', '--max-completion-length', '3'],
    ]);
    if (E.isLeft(cfg)) throw cfg.left;
    const seen = await trainingPrompts(cfg.right, taskFor(cfg.right));
    expect(seen.firstStep).toEqual(contents(rows).slice(0, 4));
    expect(seen.heldOut).toEqual(contents(test));
    // verl renders the messages with the model's chat template: the ids rlvr train gives the model.
    const tok = await loadHfTokenizer(model);
    if (E.isLeft(tok)) throw tok.left;
    for (const row of [...rows, ...test])
      expect(tok.right.encode(tok.right.renderChat(row.prompt, { addGenerationPrompt: true }))).toEqual(
        tok.right.promptIds(row.prompt[0]!.content),
      );
  }, 120_000);

  it('another seed draws other training prompts and the same held-out prompts, as rlvr train does', async () => {
    const args = ['--task', 'multiplication', '--digits', '2,1', '--steps', '2', '--prompts-per-step', '5'];
    const a = await exported([...args, '--seed', '1', '--eval-prompts', '7']);
    const b = await exported([...args, '--seed', '2', '--eval-prompts', '7']);
    expect(contents(a.train)).toHaveLength(10);
    expect(contents(a.train)).not.toEqual(contents(b.train));
    expect(contents(a.test)).toEqual(contents(b.test));
    for (const row of [...a.train, ...a.test]) {
      const [x, y] = row.prompt[0]!.content.slice(0, -1).split('*').map(Number);
      expect(row.reward_model.ground_truth).toBe(String(x! * y!));
    }
  });

  it('a dataset: every training row once in file order, the held-out prompts rlvr train evaluates', async () => {
    const file = join(DATA_DIR, 'dataset.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n');
    const source = lines.map((l, i) => ({ line: i + 1, row: l.trim() === '' ? null : JSON.parse(l) }));
    const { train: rows, test, stdout } = await exported(['--dataset', file, '--eval-prompts', '12']);
    expect(stdout).toContain(`training prompts (the rows of ${file})`);
    const trainLines = source.filter((s) => s.row !== null && splitOf(s.row.prompt) === 'train');
    expect(rows.map((r) => r.extra_info.line)).toEqual(trainLines.map((s) => s.line));
    expect(test).toHaveLength(12);
    for (const [split, list] of [
      ['train', rows],
      ['test', test],
    ] as const)
      list.forEach((row, i) => {
        expectVerlRow(row, split, i, 'rlvr/dataset');
        const from = source[row.extra_info.line! - 1]!.row as { prompt: string; answer: string | number };
        expect(row.prompt[0]!.content).toBe(from.prompt);
        expect(row.reward_model.ground_truth).toBe(String(from.answer));
        expect(verifyBoxed(`so ${boxed(row.reward_model.ground_truth)}`, row.reward_model.ground_truth)).toBe(1);
        expect(verifyBoxed(`so ${boxed(`${row.reward_model.ground_truth}1`)}`, row.reward_model.ground_truth)).toBe(0);
      });
    const run = tinyRun({
      dataset: file,
      evalPrompts: 12,
      steps: 1,
      warmStartSteps: 0,
      evalK: 1,
      maxCompletionLength: 20,
    });
    const longest = { ...run, model: { ...run.model, maxSeqLen: 160 } };
    const seen = await trainingPrompts(longest, await loadDatasetTask(file));
    expect(seen.heldOut).toEqual(contents(test));
  }, 120_000);

  it("writes verl's layout: prompt list<struct<role, content>>, reward_model and extra_info structs", () => {
    const bytes = readFileSync(join(DATA_DIR, 'dataset', 'train.parquet'));
    const metadata = parquetMetadata(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    const shape = (t: SchemaTree): unknown => ({
      [t.element.name]: [
        t.element.repetition_type ?? null,
        t.element.converted_type ?? t.element.type ?? null,
        ...t.children.map(shape),
      ],
    });
    expect(parquetSchema(metadata).children.map(shape)).toEqual([
      { data_source: ['OPTIONAL', 'UTF8'] },
      {
        prompt: [
          'OPTIONAL',
          'LIST',
          {
            list: [
              'REPEATED',
              null,
              { element: ['OPTIONAL', null, { role: ['OPTIONAL', 'UTF8'] }, { content: ['OPTIONAL', 'UTF8'] }] },
            ],
          },
        ],
      },
      { ability: ['OPTIONAL', 'UTF8'] },
      { reward_model: ['OPTIONAL', null, { style: ['OPTIONAL', 'UTF8'] }, { ground_truth: ['OPTIONAL', 'UTF8'] }] },
      {
        extra_info: [
          'OPTIONAL',
          null,
          { split: ['OPTIONAL', 'UTF8'] },
          { index: ['OPTIONAL', 'INT64'] },
          { line: ['OPTIONAL', 'INT64'] },
        ],
      },
    ]);
  });

  it('refuses bad input in one line with its exit status, and replaces nothing it reads', () => {
    const out = tempDir();
    const expectRefusal = (args: readonly string[], status: number, message: RegExp): void => {
      const r = cli(args);
      expect(r.status, r.stderr).toBe(status);
      expect(r.stdout).toBe('');
      expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    };
    // An existing file: refused (before either file is written) unless --overwrite.
    writeFileSync(join(out, 'train.parquet'), 'mine');
    expectRefusal(['--output', out], 2, /train\.parquet exists: give --overwrite/);
    expect(readFileSync(join(out, 'train.parquet'), 'utf8')).toBe('mine');
    expect(existsSync(join(out, 'test.parquet'))).toBe(false);
    expect(cli(['--output', out, '--overwrite', '--steps', '1']).status).toBe(0);
    expect(readFileSync(join(out, 'train.parquet')).subarray(0, 4).toString()).toBe('PAR1');
    // A link or a directory in the way is never replaced, --overwrite or not.
    const other = tempDir();
    writeFileSync(join(other, 'target'), 'elsewhere');
    symlinkSync(join(other, 'target'), join(other, 'train.parquet'));
    mkdirSync(join(other, 'test.parquet'));
    expectRefusal(['--output', other, '--overwrite'], 2, /train\.parquet exists and is not a regular file/);
    expect(readFileSync(join(other, 'target'), 'utf8')).toBe('elsewhere');
    // The dataset the command reads, where an output file would go: kept, --overwrite or not.
    const data = tempDir();
    const rows = readFileSync(join(DATA_DIR, 'dataset.jsonl'), 'utf8');
    writeFileSync(join(data, 'train.parquet'), rows);
    expectRefusal(
      ['--output', data, '--dataset', join(data, 'train.parquet'), '--overwrite'],
      2,
      /is the --dataset file, which is never replaced/,
    );
    expect(readFileSync(join(data, 'train.parquet'), 'utf8')).toBe(rows);
    // Command lines.
    expectRefusal(
      ['--output', tempDir(), '--objective', 'grpo'],
      2,
      /--objective is not an option of rlvr export-data/,
    );
    expectRefusal(['--task', 'addition'], 2, /--output is required/);
    expectRefusal(['--output', tempDir(), '--task', 'countdown'], 2, /--task countdown is not exported/);
    expectRefusal(['--output', tempDir(), '--task', 'algebra'], 2, /task/);
    expectRefusal(['--output', tempDir(), '--seed', 'x'], 2, /--seed/);
    expectRefusal(
      ['--output', tempDir(), '--dataset', 'd.jsonl', '--seed', '3'],
      2,
      /--seed does not apply with --dataset/,
    );
    expectRefusal(['--output', tempDir(), '--steps', '100000', '--prompts-per-step', '100'], 2, /over the limit/);
    // Files: a dataset that is missing or malformed, an --output that is a file.
    expectRefusal(['--output', tempDir(), '--dataset', join(data, 'none.jsonl')], 3, /none\.jsonl: no such file/);
    writeFileSync(join(data, 'bad.jsonl'), '{"prompt": "1+1=", "answer": "2"}\n{"prompt": 3}\n');
    expectRefusal(['--output', tempDir(), '--dataset', join(data, 'bad.jsonl')], 2, /bad\.jsonl:2: prompt/);
    expectRefusal(['--output', join(data, 'bad.jsonl')], 2, /--output .*bad\.jsonl is not a directory/);
    // Help.
    const help = cli(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: rlvr export-data --output DIR/);
  }, 60_000);

  it('python/tests/data is what the command writes now (regenerate: examples/export-verl-data.ts)', async () => {
    const out = tempDir();
    for (const [name, args] of Object.entries(DATA_EXPORTS)) {
      const r = cli([...args, '--output', join(out, name)]);
      expect(r.status, r.stderr).toBe(0);
      for (const file of DATA_FILE_NAMES)
        expect(
          readFileSync(join(out, name, file)).equals(readFileSync(join(DATA_DIR, name, file))),
          `${name}/${file} differs`,
        ).toBe(true);
    }
    expect(await rowsJson(DATA_DIR)).toBe(readFileSync(join(DATA_DIR, 'rows.json'), 'utf8'));
  }, 60_000);
});
