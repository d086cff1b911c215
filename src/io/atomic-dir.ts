import {
  basename,
  dirname,
  join,
  lstat,
  makeDirectories,
  mkdir,
  open,
  readdir,
  readlink,
  readRegularFile,
  rename,
  rm,
  stat,
  symlink,
  unlink,
} from '../platform/files.js';
import { crashPoint, processTag, sha256File } from '../platform/host.js';
import { FileSystemError } from '../platform/errors.js';
import { RlvrError, jsonSyntaxDetail } from '../core/errors.js';

/**
 * A directory that appears whole or not at all. `writeDirAtomic(dir, write)` lets `write` fill a fresh sibling
 * directory, writes a manifest (every file's size and SHA-256) last, fsyncs the files and the directory, and then
 * points `dir` at it by renaming a symbolic link over the old one (rename is atomic; readers see the old or the
 * new directory, never a mix). Older generations are removed afterwards; a save that fails (a throw, not a kill)
 * removes its own partial generation, so only a killed save leaves one, which the next save removes. Files are
 * hashed in chunks (`sha256File`), never read whole, so they may be of any size. `verifyManifest` checks a
 * directory against its manifest on load. Any writer of a set of files (trainer checkpoints, Hugging Face exports) can
 * use it: it only needs a callback that writes files into the directory it is given.
 *
 * Layout: `dir` -> `dir.gen-<n>/` (a relative symlink), `dir.gen-<n>/manifest.json`. A `dir` that is a plain
 * directory (an older checkpoint, or one made by another tool) is read as is and replaced on the next save.
 */
export const MANIFEST = 'manifest.json';

export interface ManifestEntry {
  readonly size: number;
  readonly sha256: string;
}
export const MANIFEST_FORMAT = 'rlvr-wgpu/manifest-1';
export interface Manifest {
  readonly format: typeof MANIFEST_FORMAT;
  readonly files: Readonly<Record<string, ManifestEntry>>;
}

async function fsyncPath(path: string): Promise<void> {
  const h = await open(path, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else if (e.isFile()) out.push(rel);
  }
  return out.sort();
}

const GEN = /\.gen-(\d+)$/;

async function generations(dir: string): Promise<{ name: string; n: number }[]> {
  const parent = dirname(dir);
  const base = basename(dir);
  const names = await readdir(parent).catch(() => [] as string[]);
  return names
    .filter((n) => n.startsWith(`${base}.gen-`) && GEN.test(n))
    .map((n) => ({ name: n, n: Number(GEN.exec(n)![1]) }))
    .sort((a, b) => a.n - b.n);
}

/** Remove what a failed save made; the error being thrown says what went wrong, so a failure here adds nothing. */
const discard = (path: string): Promise<void> => rm(path, { recursive: true, force: true }).catch(() => undefined);

/**
 * Write a directory atomically (see the module comment). Throws `FileSystemError` naming the path and cause (a
 * typed error of `write`'s own, a `CheckpointError` say, as it is); if `write` or anything before the swap
 * throws, the new generation is removed first and `dir` is as it was.
 */
export async function writeDirAtomic(dir: string, write: (tmpDir: string) => Promise<void>): Promise<void> {
  const parent = dirname(dir);
  const base = basename(dir);
  await makeDirectories(parent).catch((e: unknown) => {
    throw FileSystemError.from(parent, e);
  });
  const current = await lstat(dir).catch(() => null);
  const gens = await generations(dir);
  const next = (gens.at(-1)?.n ?? 0) + 1;
  const genName = `${base}.gen-${next}`;
  const genDir = join(parent, genName);
  const asideDir = join(parent, `${base}.gen-0`);
  let step = genDir;
  let movedAside = false;
  let swapped = false;
  try {
    await rm(genDir, { recursive: true, force: true });
    await mkdir(genDir);
    await write(genDir);
    crashPoint('checkpoint:files-written');
    const files: Record<string, ManifestEntry> = {};
    for (const rel of await listFiles(genDir)) {
      step = join(genDir, rel);
      files[rel] = await sha256File(step);
      await fsyncPath(step);
    }
    step = join(genDir, MANIFEST);
    const manifest: Manifest = { format: MANIFEST_FORMAT, files };
    const h = await open(step, 'w');
    try {
      await h.writeFile(JSON.stringify(manifest, null, 2));
      await h.sync();
    } finally {
      await h.close();
    }
    step = genDir;
    await fsyncPath(genDir);
    crashPoint('checkpoint:before-swap');
    // A plain directory from an older save cannot be replaced by a rename of a link: move it aside first.
    if (current?.isDirectory()) {
      step = dir;
      await rename(dir, asideDir);
      movedAside = true;
    }
    const link = join(parent, `${base}.link-${next}`);
    step = link;
    await unlink(link).catch(() => undefined);
    await symlink(genName, link);
    step = dir;
    await rename(link, dir);
    swapped = true;
    await fsyncPath(parent);
    crashPoint('checkpoint:after-swap');
  } catch (e) {
    // Before the swap the new generation is an orphan (a failed write of a 2 GB file left 3.3 GB of one): remove
    // it, and put back a plain directory moved aside. After the swap it is the checkpoint: keep it.
    if (!swapped) {
      await discard(join(parent, `${base}.link-${next}`));
      if (movedAside) await rename(asideDir, dir).catch(() => undefined);
      await discard(genDir);
    }
    throw e instanceof RlvrError ? e : FileSystemError.from(step, e);
  }
  // Older generations are garbage now; failing to remove them loses nothing.
  for (const g of await generations(dir))
    if (g.name !== genName) await rm(join(parent, g.name), { recursive: true, force: true }).catch(() => undefined);
}

/**
 * Write `dir` as a plain directory (no link: what a copy or another tool sees as it is), atomically by rename:
 * `write` fills `dir.tmp-<pid>` beside it, whose files and itself are fsynced, and which is then renamed to `dir`.
 * Replacing an existing `dir` takes two renames (a directory cannot be renamed over a non-empty one): the old is
 * moved to `dir.old-<pid>` first and removed once the new one is in place, so a crash between the two leaves the
 * complete old copy beside a complete new one, never a mixed directory. An older version's `dir` link and its
 * generations are removed the same way. Throws `FileSystemError` naming the path and cause (a typed error of
 * `write`'s own as it is); a failure before the new directory is in place removes `dir.tmp-<pid>` and leaves
 * `dir` as it was.
 */
export async function writePlainDirAtomic(dir: string, write: (tmpDir: string) => Promise<void>): Promise<void> {
  const parent = dirname(dir);
  const base = basename(dir);
  const tmp = join(parent, `${base}.tmp-${processTag()}`);
  const old = join(parent, `${base}.old-${processTag()}`);
  let step = parent;
  let movedAside = false;
  let placed = false;
  try {
    await makeDirectories(parent);
    step = tmp;
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp);
    await write(tmp);
    for (const rel of await listFiles(tmp)) {
      step = join(tmp, rel);
      await fsyncPath(step);
    }
    step = tmp;
    await fsyncPath(tmp);
    const current = await lstat(dir).catch(() => null);
    if (current) {
      step = dir;
      await rm(old, { recursive: true, force: true });
      await rename(dir, old);
      movedAside = true;
    }
    step = dir;
    await rename(tmp, dir);
    placed = true;
    await fsyncPath(parent);
  } catch (e) {
    if (!placed) {
      if (movedAside) await rename(old, dir).catch(() => undefined);
      await discard(tmp);
    }
    throw e instanceof RlvrError ? e : FileSystemError.from(step, e);
  }
  // The old copy (or link) and an older version's generations are garbage now; failing to remove them loses nothing.
  await rm(old, { recursive: true, force: true }).catch(() => undefined);
  for (const g of await generations(dir))
    await rm(join(parent, g.name), { recursive: true, force: true }).catch(() => undefined);
}

/**
 * Resolve what `dir` points at; a crash between moving a plain directory aside and linking the new generation
 * leaves no `dir`, only generations: the newest one with a manifest is then the checkpoint.
 */
export async function resolveDir(dir: string): Promise<string> {
  const st = await lstat(dir).catch(() => null);
  if (st?.isSymbolicLink()) return join(dirname(dir), await readlink(dir));
  if (st) return dir;
  const gens = (await generations(dir)).reverse();
  for (const g of gens) {
    const path = join(dirname(dir), g.name);
    if (
      await stat(join(path, MANIFEST)).then(
        () => true,
        () => false,
      )
    )
      return path;
  }
  return dir;
}

export type ManifestProblem = { readonly file: string; readonly detail: string };

/** Every entry under `dir` (relative paths, sorted) with whether it is a regular file; directories are walked. */
async function listEntries(dir: string, prefix = ''): Promise<{ rel: string; regular: boolean }[]> {
  const out: { rel: string; regular: boolean }[] = [];
  for (const e of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listEntries(dir, rel)));
    else out.push({ rel, regular: e.isFile() });
  }
  return out.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

const safeRelative = (rel: string): boolean =>
  rel.length > 0 &&
  !rel.startsWith('/') &&
  !rel.includes('\\') &&
  rel.split('/').every((p) => p !== '' && p !== '.' && p !== '..');

/**
 * Check a directory against its manifest: the manifest must be there, of the known format, and list exactly the
 * regular files the directory holds (a file it does not list, or anything other than a regular file, is a
 * problem: nothing is read unverified), each with its size and SHA-256. Null when all agree.
 */
export async function verifyManifest(dir: string): Promise<ManifestProblem | null> {
  const st = await lstat(join(dir, MANIFEST)).catch(() => null);
  if (st === null) return { file: MANIFEST, detail: 'is missing (a checkpoint without one cannot be verified)' };
  if (!st.isFile()) return { file: MANIFEST, detail: 'is not a regular file' };
  const text = await readRegularFile(join(dir, MANIFEST), 'utf8');
  let manifest: Partial<Manifest>;
  try {
    manifest = JSON.parse(text) as Partial<Manifest>;
  } catch (e) {
    return { file: MANIFEST, detail: `not valid JSON (${jsonSyntaxDetail(e)})` };
  }
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest))
    return { file: MANIFEST, detail: 'is not a JSON object' };
  if (manifest.format !== MANIFEST_FORMAT)
    return { file: MANIFEST, detail: `has format ${JSON.stringify(manifest.format)}, expected "${MANIFEST_FORMAT}"` };
  const files = manifest.files;
  if (typeof files !== 'object' || files === null || Array.isArray(files))
    return { file: MANIFEST, detail: 'has no files record' };
  const listed = Object.keys(files);
  if (listed.length === 0) return { file: MANIFEST, detail: 'lists no files' };
  for (const [rel, entry] of Object.entries(files)) {
    if (
      !safeRelative(rel) ||
      rel === MANIFEST ||
      !Number.isSafeInteger(entry?.size) ||
      entry.size < 0 ||
      typeof entry?.sha256 !== 'string' ||
      !/^[0-9a-f]{64}$/.test(entry.sha256)
    ) {
      return { file: MANIFEST, detail: `bad entry for ${JSON.stringify(rel).slice(0, 200)}` };
    }
  }
  const present = (await listEntries(dir)).filter((e) => e.rel !== MANIFEST);
  for (const e of present) {
    if (!e.regular) return { file: e.rel, detail: 'is not a regular file' };
    if (!Object.hasOwn(files, e.rel)) return { file: e.rel, detail: 'is not listed in the manifest' };
  }
  const regular = new Set(present.map((e) => e.rel));
  for (const [rel, entry] of Object.entries(files)) {
    if (!regular.has(rel)) return { file: rel, detail: 'is listed in the manifest but missing' };
    // The size first (a stat), so a truncated file is named without hashing it; then the hash, in chunks.
    const size = (await stat(join(dir, rel))).size;
    if (size !== entry.size) return { file: rel, detail: `has ${size} bytes, the manifest says ${entry.size}` };
    const read = await sha256File(join(dir, rel));
    if (read.size !== entry.size)
      return { file: rel, detail: `has ${read.size} bytes, the manifest says ${entry.size}` };
    if (read.sha256 !== entry.sha256) return { file: rel, detail: 'does not match its SHA-256 in the manifest' };
  }
  return null;
}
