import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { Rng } from '../../src/core/rng.js';
import { DatasetError } from '../../src/tasks/dataset.js';
import { invalidUtf8At, loadDatasetTask } from '../../src/training/pretrained.js';
import { rejectionOf, tempDir } from './helpers/harness.js';

/**
 * A dataset is UTF-8: bytes that are not are refused, naming the file, the line and the byte offset, not read as
 * U+FFFD (which would train on text the user never wrote). The check runs on the stream, chunk by chunk.
 */
describe('invalid UTF-8 in a dataset is refused, not replaced by U+FFFD', () => {
  const row = (prompt: string, answer: string): string => `${JSON.stringify({ prompt, answer })}\n`;
  const write = (bytes: Buffer): string => {
    const path = join(tempDir('utf8'), 'data.jsonl');
    writeFileSync(path, bytes);
    return path;
  };

  it('"caf\\xe9" is a DatasetError (exit 2) naming the file, line and byte offset', async () => {
    const first = Buffer.from(row('What is 1+1?', '2'));
    const bad = Buffer.concat([
      Buffer.from('{"prompt": "caf'),
      Buffer.from([0xe9]),
      Buffer.from('", "answer": "1"}\n'),
    ]);
    const path = write(Buffer.concat([first, bad, Buffer.from(row('What is 2+2?', '4'))]));
    const e = await rejectionOf(loadDatasetTask(path));
    expect(e).toBeInstanceOf(DatasetError);
    expect(e).toMatchObject({ file: path, line: 2, field: 'line' });
    const at = '{"prompt": "caf'.length;
    expect((e as Error).message).toContain(`byte offset ${at} of the line (${first.length + at} of the file)`);
    expect(describeFailure(e).code).toBe(EXIT.usage);
  });

  it('past a chunk boundary, and on a last line without a newline, the offsets still count from the file start', async () => {
    const filler = Buffer.from(row(`What is ${'x'.repeat(70_000)}?`, '1'));
    const bad = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const path = write(Buffer.concat([filler, filler, bad]));
    await expect(loadDatasetTask(path)).rejects.toMatchObject({
      line: 3,
      message: expect.stringContaining(`byte offset 13 of the line (${2 * filler.length + 13} of the file)`),
    });
  });

  it('valid multi-byte text split across read chunks is read as it is', async () => {
    const rows: Buffer[] = [];
    for (let i = 0; i < 4000; i++) rows.push(Buffer.from(row(`Combien font ${i} + 1 ? café ☕ 𝟙`, String(i + 1))));
    const task = await loadDatasetTask(write(Buffer.concat(rows)));
    expect(task.rows).toHaveLength(4000);
    expect(task.rows.every((p) => p.prompt.includes('café ☕ 𝟙') && !p.prompt.includes('\ufffd'))).toBe(true);
  });

  it('invalidUtf8At agrees with a fatal TextDecoder on random bytes', () => {
    const rng = new Rng(26);
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    for (let t = 0; t < 3000; t++) {
      const b = new Uint8Array(1 + rng.int(8));
      for (let i = 0; i < b.length; i++) b[i] = rng.int(4) === 0 ? rng.int(128) : 0x80 + rng.int(128);
      let valid = true;
      try {
        strict.decode(b);
      } catch {
        valid = false;
      }
      const at = invalidUtf8At(b);
      expect(at === -1, Buffer.from(b).toString('hex')).toBe(valid);
      if (!valid) expect(() => strict.decode(b.subarray(0, at))).not.toThrow();
    }
  });
});
