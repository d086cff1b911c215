/**
 * Uniform blocks by content. Each distinct block of words gets one slot in a 64 KiB arena and keeps it, so the
 * same shapes (every step of a training loop) bind the same slot, and the bind group that names it can be
 * cached. New slots are copied into the arena's host mirror and uploaded just before the submit that uses them.
 *
 * When the slots fill `maxArenas` arenas (contents that change every step, such as AdamW's bias corrections,
 * keep adding slots), the store is recycled at the next submit: arenas are rewritten from the start. That is
 * safe because `queue.writeBuffer` is ordered after every command already submitted; the runtime then drops
 * its cached bind groups, which name slots by position.
 */
const ARENA_BYTES = 64 * 1024;

interface Arena {
  readonly gpu: GPUBuffer;
  readonly cpu: Uint8Array;
  used: number;
  /** Byte range written since the last upload. */
  dirtyFrom: number;
  dirtyTo: number;
}

/** One block's place in an arena; the same object for the same contents while the store is not recycled (the
 * bind-group cache keys on it). */
export interface UniformSlot {
  readonly binding: GPUBufferBinding;
}

export class UniformStore {
  private arenas: Arena[] = [];
  private current = 0;
  private readonly slots = new Map<string, UniformSlot>();
  private full = false;
  /** Bumped on every recycle: bind groups cached under an older generation name stale slots. */
  generation = 0;

  constructor(
    private readonly create: (size: number) => GPUBuffer,
    private readonly align: number,
    private readonly maxArenas = 16,
  ) {}

  slot(words: Uint32Array): UniformSlot {
    const key = contentKey(words);
    const hit = this.slots.get(key);
    if (hit) return hit;
    const size = Math.ceil(words.byteLength / 16) * 16;
    let arena = this.arenas[this.current];
    let offset = arena ? Math.ceil(arena.used / this.align) * this.align : 0;
    if (!arena || offset + size > ARENA_BYTES) {
      if (arena) this.current++;
      arena = this.arenas[this.current];
      if (!arena) {
        arena = { gpu: this.create(ARENA_BYTES), cpu: new Uint8Array(ARENA_BYTES), used: 0, dirtyFrom: 0, dirtyTo: 0 };
        this.arenas.push(arena);
      }
      offset = 0;
      if (this.current + 1 >= this.maxArenas) this.full = true;
    }
    arena.cpu.set(new Uint8Array(words.buffer, words.byteOffset, words.byteLength), offset);
    arena.cpu.fill(0, offset + words.byteLength, offset + size);
    if (arena.dirtyTo === arena.dirtyFrom) arena.dirtyFrom = offset;
    arena.dirtyTo = offset + size;
    arena.used = offset + size;
    const slot = { binding: { buffer: arena.gpu, offset, size } };
    this.slots.set(key, slot);
    return slot;
  }

  /** Upload what changed; called just before a submit. Recycles the store if it filled up. */
  upload(queue: GPUQueue): void {
    for (const a of this.arenas) {
      if (a.dirtyTo > a.dirtyFrom)
        queue.writeBuffer(a.gpu, a.dirtyFrom, a.cpu.buffer, a.dirtyFrom, a.dirtyTo - a.dirtyFrom);
      a.dirtyFrom = a.dirtyTo = 0;
    }
  }

  /** After a submit: start over if the arenas are full (the next writes are ordered after that submit). */
  afterSubmit(): void {
    if (!this.full) return;
    this.full = false;
    this.slots.clear();
    for (const a of this.arenas) a.used = 0;
    this.current = 0;
    this.generation++;
  }

  get arenaCount(): number {
    return this.arenas.length;
  }

  destroy(): void {
    for (const a of this.arenas) a.gpu.destroy();
    this.arenas = [];
    this.slots.clear();
  }
}

/** The words as a string of UTF-16 code units (two per word): a cheap exact map key. */
function contentKey(words: Uint32Array): string {
  // From the words' values, not a view of their buffer (asking an on-heap array for its buffer moves it).
  KEY_CODES.length = 0;
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    KEY_CODES.push(w & 0xffff, w >>> 16);
  }
  return String.fromCharCode.apply(null, KEY_CODES);
}
const KEY_CODES: number[] = [];
