import { spawnSync } from 'node:child_process';
import {
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { dispose } from '../../src/core/scope.js';
import { loadHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { MemoryError, type MemoryEstimate } from '../../src/training/memory.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { loadHfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir, tinyTokenizerJson } from './tiny-hub.js';

/**
 * Issue 19, Hub directories as an attacker or a careless user hands them over: every refusal is a typed error
 * naming the file (and field or tensor) with exit 3, before anything trains.
 */
const cpu = new CpuBackend();
const RUN = ['--steps', '1', '--prompts-per-step', '2', '--num-generations', '2', '--max-completion-length', '4'];
const EVAL = ['--eval-prompts', '2', '--eval-k', '1'];

/** `rlvr train --model dir ...` through the library: the error it ends with, and no record written. */
async function trainError(dir: string, extra: readonly string[] = []): Promise<unknown> {
  const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, ...extra]);
  if (E.isLeft(cfg)) throw cfg.left;
  const records: MetricRecord[] = [];
  const e = await train(cfg.right, { backend: cpu, onRecord: (r) => records.push(r) }).then(
    (r) => {
      dispose(r.params);
      return null;
    },
    (err: unknown) => err,
  );
  expect(records).toEqual([]);
  return e;
}

describe('issue 19 item 8: NaN/Inf weights are refused at load', () => {
  for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
    it(`a weight of ${value} is refused naming the tensor (the run exited 4 later, blaming training)`, async () => {
      const dir = await tinyHubDir({ poison: value });
      const r = await loadHfCheckpoint(dir, cpu)();
      expect(E.isLeft(r) && r.left).toMatchObject({
        kind: 'non-finite',
        field: 'model.norm.weight',
        file: 'model.safetensors',
      });
      const e = await trainError(dir);
      expect(e).toMatchObject({ kind: 'non-finite', field: 'model.norm.weight' });
      expect(describeFailure(e).code).toBe(EXIT.io);
      expect(describeFailure(e).line).toMatch(/model\.safetensors.*model\.norm\.weight.*--allow-non-finite-weights/);
    });
  }

  it('allowed when asked: loadHfCheckpoint(..., { allowNonFinite }) and --allow-non-finite-weights', async () => {
    const dir = await tinyHubDir({ poison: Number.NaN });
    const r = await loadHfCheckpoint(dir, cpu, { allowNonFinite: true })();
    if (E.isLeft(r)) throw r.left;
    expect(Number.isNaN(r.right.params.finalNorm.dataSync()[0])).toBe(true);
    dispose(r.right.params);
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--allow-non-finite-weights']);
    if (E.isLeft(cfg)) throw cfg.left;
    expect(cfg.right.allowNonFiniteWeights).toBe(true);
  });
});

/** A FIFO at `path` (nobody ever writes it: opening it for reading the usual way blocks forever). */
function fifo(path: string): void {
  rmSync(path, { recursive: true, force: true });
  const r = spawnSync('mkfifo', [path]);
  if (r.status !== 0) throw new Error(`mkfifo failed: ${r.stderr}`);
}

describe('issue 19 item 7: only regular files are opened, and every file error names its path', () => {
  it('a weight_map entry pointing at a FIFO is refused at once, naming the path (it hung)', async () => {
    const dir = await tinyHubDir();
    const names = ['model.embed_tokens.weight', 'model.norm.weight'];
    const map: Record<string, string> = {};
    const header = JSON.parse(
      readFileSync(join(dir, 'model.safetensors'))
        .subarray(8, 8 + readFileSync(join(dir, 'model.safetensors')).readUInt32LE(0))
        .toString(),
    ) as Record<string, unknown>;
    for (const n of Object.keys(header)) if (n !== '__metadata__') map[n] = 'model.safetensors';
    map[names[1]!] = 'model-00002-of-00002.safetensors';
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: map }));
    fifo(join(dir, 'model-00002-of-00002.safetensors'));
    const r = await loadHfCheckpoint(dir, cpu)();
    if (E.isRight(r)) throw new Error('loaded');
    expect(r.left.message).toContain(join(dir, 'model-00002-of-00002.safetensors'));
    expect(r.left.message).toMatch(/not a regular file/);
    expect(describeFailure(r.left).code).toBe(EXIT.io);
  }, 10_000);

  it("model.safetensors as a directory names the path (it said 'rlvr: : is a directory (EISDIR)')", async () => {
    const dir = await tinyHubDir();
    rmSync(join(dir, 'model.safetensors'));
    mkdirSync(join(dir, 'model.safetensors'));
    const e = await trainError(dir);
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.io);
    expect(line).toContain(join(dir, 'model.safetensors'));
    expect(line).not.toMatch(/(^|\s): /);
  }, 10_000);

  const others: [string, (dir: string) => string][] = [
    ['config.json', (dir) => join(dir, 'config.json')],
    ['tokenizer.json', (dir) => join(dir, 'tokenizer.json')],
    ['tokenizer_config.json', (dir) => join(dir, 'tokenizer_config.json')],
    ['generation_config.json', (dir) => join(dir, 'generation_config.json')],
    ['chat_template.jinja', (dir) => join(dir, 'chat_template.jinja')],
  ];
  for (const [what, at] of others) {
    for (const kind of ['a FIFO', 'a directory'] as const) {
      it(`${what} as ${kind} is refused at once, exit 3, naming the path`, async () => {
        const dir = await tinyHubDir();
        const path = at(dir);
        if (kind === 'a FIFO') fifo(path);
        else {
          rmSync(path, { force: true });
          mkdirSync(path);
        }
        const e = await trainError(dir);
        const { code, line } = describeFailure(e);
        expect(line).toContain(path);
        expect(code).toBe(EXIT.io);
      }, 10_000);
    }
  }

  it('a --dataset that is a FIFO or a directory is refused at once, naming the path', async () => {
    const dir = await tinyHubDir();
    const root = mkdtempSync(join(tmpdir(), 'rlvr-fifo-data-'));
    for (const make of [(p: string) => fifo(p), (p: string) => mkdirSync(p)]) {
      const data = join(root, `data-${Math.random()}.jsonl`);
      make(data);
      const e = await trainError(dir, ['--dataset', data]);
      const { code, line } = describeFailure(e);
      expect(line).toContain(data);
      expect([EXIT.io, EXIT.usage]).toContain(code);
    }
  }, 10_000);
});

describe('issue 19 item 20: a missing tokenizer.json is a file that cannot be read', () => {
  it("exit 3 (README), naming the path once (it exited 2 saying 'tokenizer.json: tokenizer.json:')", async () => {
    const dir = await tinyHubDir();
    rmSync(join(dir, 'tokenizer.json'));
    const e = await trainError(dir);
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.io);
    expect(line).toBe(`tokenizer: ${join(dir, 'tokenizer.json')}: no such file or directory (ENOENT)`);
  });
});

describe("issue 19 item 4: config.json obeys the flags' limits, and the estimate counts what it sizes", () => {
  const cases: [string, number][] = [
    ['max_position_embeddings', 1e9],
    ['vocab_size', 1e9],
    ['num_hidden_layers', 1e6],
    ['hidden_size', 1e6],
    ['intermediate_size', 1e7],
    ['num_attention_heads', 1e5],
    ['head_dim', 1e6],
  ];
  for (const [field, value] of cases) {
    it(`${field}: ${value} is refused at once as above its limit, naming config.json (it grew past 1.8 GB)`, async () => {
      const dir = await tinyHubDir({ config: { [field]: value } });
      const t0 = performance.now();
      const e = await trainError(dir);
      expect(performance.now() - t0).toBeLessThan(5_000);
      expect(e).toMatchObject({ kind: 'bad-config', field, file: 'config.json' });
      expect((e as Error).message).toMatch(/above the limit of/);
      expect(describeFailure(e).code).toBe(EXIT.io);
    }, 20_000);
  }

  it('RoPE tables sized by max_position_embeddings are in the estimate, and a tight limit refuses them', async () => {
    const dir = await tinyHubDir({ config: { max_position_embeddings: 1_000_000 } });
    const estimates: MemoryEstimate[] = [];
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--memory-limit-gb', '0.02']);
    if (E.isLeft(cfg)) throw cfg.left;
    const e = await train(cfg.right, { backend: cpu, onMemoryEstimate: (x) => estimates.push(x) }).then(
      () => null,
      (err: unknown) => err,
    );
    // cos and sin, [positions, headDim / 2] f32 each, built on the host and uploaded: 2 x 2 x 1e6 x 2 x 4 bytes.
    expect(estimates[0]!.rope).toBe(2 * 2 * 1_000_000 * 2 * 4);
    expect(estimates[0]!.total).toBeGreaterThan(estimates[0]!.rope);
    expect(e).toBeInstanceOf(MemoryError);
    expect((e as Error).message).toMatch(/RoPE tables 30\.5 MiB/);
  });
});

describe("issue 19 item 5: chat templates are the model directory's fault, and rendering is bounded", () => {
  const bad: [string, string, RegExp][] = [
    ['a syntax error', '{% for %}', /chat_template/],
    [
      'raise_exception(...)',
      "{{ raise_exception('this model needs a system turn') }}",
      /this model needs a system turn/,
    ],
    ['a call on an undefined value', '{{ foo() }}', /chat_template/],
    ['range(100000000)', '{% for i in range(100000000) %}x{% endfor %}', /limit/],
    [
      'a string doubled 40 times',
      "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
      /limit/,
    ],
    [
      'nested loops of 1e10 steps',
      '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}',
      /limit/,
    ],
  ];
  for (const [what, template, why] of bad) {
    for (const where of ['tokenizer_config.json', 'chat_template.jinja'] as const) {
      it(`${what} in ${where}: exit 3 naming the file, at once (it was exit 1, or ran out of memory after 95 s)`, async () => {
        const dir = await tinyHubDir();
        if (where === 'chat_template.jinja') writeFileSync(join(dir, where), template);
        else
          writeFileSync(
            join(dir, where),
            JSON.stringify({ eos_token: '<|im_end|>', pad_token: '<|endoftext|>', chat_template: template }),
          );
        const t0 = performance.now();
        const e = await trainError(dir);
        expect(performance.now() - t0).toBeLessThan(10_000);
        const { code, line } = describeFailure(e);
        expect(code).toBe(EXIT.io);
        expect(line).toContain(where);
        expect(line).toMatch(why);
        expect(line.length).toBeLessThan(1_000);
      }, 30_000);
    }
  }

  it('chat_template: 42 is refused, not ignored', async () => {
    const dir = await tinyHubDir({ tokenizerConfig: { chat_template: 42 } });
    const e = await trainError(dir);
    expect(describeFailure(e).code).toBe(EXIT.io);
    expect(e).toMatchObject({ file: 'tokenizer_config.json', field: 'chat_template' });
  });

  it('the tiny template still renders as Qwen does', async () => {
    const dir = await tinyHubDir();
    const tok = await loadHfTokenizer(dir);
    if (E.isLeft(tok)) throw tok.left;
    expect(tok.right.renderChat([{ role: 'user', content: '1+2=' }])).toBe(
      '<|im_start|>user\n1+2=<|im_end|>\n<|im_start|>assistant\n',
    );
  });
});

describe('issue 19 item 6: tokenizers that cannot carry the task are refused', () => {
  const withModel = (edit: (model: Record<string, unknown>) => void): Record<string, unknown> => {
    const t = tinyTokenizerJson();
    edit(t.model);
    return t;
  };
  const refusedTokenizer = async (tokenizer: Record<string, unknown>, why: RegExp): Promise<void> => {
    const dir = await tinyHubDir({ tokenizer });
    const e = await trainError(dir);
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.io);
    expect(line).toMatch(/tokenizer\.json/);
    expect(line).toMatch(why);
  };

  it("an empty vocabulary is refused (it encoded '12+34= hello' as [])", async () => {
    await refusedTokenizer(
      withModel((m) => (m.vocab = {})),
      /vocab/,
    );
  });

  it('a vocabulary that needs the merges it lacks is refused (it encoded prompts as [])', async () => {
    await refusedTokenizer(
      withModel((m) => (m.vocab = { '12': 0, '+3': 1, '4=': 2 })),
      /encodes|no tokens|decodes/,
    );
  });

  const badMerges: [string, unknown][] = [
    ['a merge of one part', ['1']],
    ['a merge of a token not in the vocabulary', [['1', 'zz']]],
    ['a merge that is not text', [42]],
    ['merges that are not a list', 'a b'],
  ];
  for (const [what, merges] of badMerges) {
    it(`${what} is refused naming the entry (malformed merges were skipped silently)`, async () => {
      await refusedTokenizer(
        withModel((m) => (m.merges = merges)),
        /merges/,
      );
    });
  }

  it("a tokenizer that drops characters of the task's answers is refused naming the text", async () => {
    // Without the byte of '7' (and with no fallback), an answer holding a 7 cannot be written by the model.
    const t = withModel((m) => {
      const vocab = { ...(m.vocab as Record<string, number>) };
      delete vocab['7'];
      m.vocab = vocab;
    });
    await refusedTokenizer(t, /decodes to|no tokens/);
  });

  it("a tokenizer with ids beyond the model's vocabulary is the model directory's fault (exit 3, was 2)", async () => {
    const dir = await tinyHubDir({ config: { vocab_size: 200 } });
    const e = await trainError(dir);
    expect(describeFailure(e).code).toBe(EXIT.io);
    expect(describeFailure(e).line).toMatch(/259.*200|vocab/);
  });
});

describe('issue 19 item 21: OUTPUT/model is a plain directory', () => {
  it('is a directory of regular files, no link, no generations; a second export replaces it whole', async () => {
    const dir = await tinyHubDir();
    const out = join(mkdtempSync(join(tmpdir(), 'rlvr-export-')), 'run');
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--output', out, '--checkpoint-every', '1']);
    if (E.isLeft(cfg)) throw cfg.left;
    dispose((await train(cfg.right, { backend: cpu })).params);
    const model = join(out, 'model');
    expect(lstatSync(model).isSymbolicLink()).toBe(false);
    expect(lstatSync(model).isDirectory()).toBe(true);
    for (const f of readdirSync(model)) expect(lstatSync(join(model, f)).isFile(), f).toBe(true);
    expect(readdirSync(model).sort()).toEqual(
      ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'].sort(),
    );
    expect(readdirSync(out).filter((e) => e.startsWith('model.'))).toEqual([]);
    // `cp -r OUTPUT/model elsewhere` copies the model (it copied a dangling link)
    const copy = join(mkdtempSync(join(tmpdir(), 'rlvr-copy-')), 'model');
    cpSync(model, copy, { recursive: true });
    const r = await loadHfCheckpoint(copy, cpu)();
    if (E.isLeft(r)) throw r.left;
    dispose(r.right.params);
    // an older version's link (model -> model.gen-1) is replaced by a plain directory on the next export
    rmSync(model, { recursive: true });
    cpSync(copy, join(out, 'model.gen-1'), { recursive: true });
    symlinkSync('model.gen-1', model);
    const more = parseTrainArgs(['--model', dir, ...RUN.map((a) => (a === '1' ? '2' : a)), ...EVAL, '--output', out]);
    if (E.isLeft(more)) throw more.left;
    dispose((await train({ ...more.right, resume: join(out, 'checkpoint') }, { backend: cpu })).params);
    expect(lstatSync(model).isSymbolicLink()).toBe(false);
    expect(readdirSync(out).filter((e) => e.startsWith('model.'))).toEqual([]);
  });
});
