import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../src/backends/webgpu/buffer-pool.js';

/**
 * The pool's destroy rule on stand-in buffers (a size and a destroy flag; no device): what it keeps when two working
 * sets alternate, as an RL loop's sampling (a read per token) and its training step do.
 */
interface Fake {
  readonly size: number;
  destroyed: boolean;
  destroy(): void;
}

function poolOf(cap: number, followPeak: boolean) {
  const made: Fake[] = [];
  const pool = new BufferPool(
    (size) => {
      const b: Fake = {
        size,
        destroyed: false,
        destroy() {
          this.destroyed = true;
        },
      };
      made.push(b);
      return b as unknown as GPUBuffer;
    },
    cap,
    followPeak,
  );
  /** One phase: acquire `sizes`, release them, submit, then `reads` sync points. */
  const phase = (sizes: readonly number[], reads: number): void => {
    const held = sizes.map((n) => pool.acquire(n));
    for (const b of held) pool.release(b);
    pool.afterSubmit();
    for (let r = 0; r < reads; r++) pool.endEpoch();
  };
  for (const n of WEIGHTS) pool.acquire(n);
  /** One RL iteration, the `i`th. */
  const iteration = (i: number): void => {
    phase(STEP, 1);
    phase([64], 8);
    phase([1024 * (i + 1)], 1);
  };
  return { pool, made, phase, iteration };
}

// The weights and optimizer state (live throughout), a training step's working set (three 16 KiB buffers, one
// read), then sampling (a small buffer, eight reads) and scoring the rollouts, which meets a size not seen before
// (another prompt length), so the pool grows there.
const WEIGHTS = [16384, 16384];
const STEP = [16384, 16384, 16384];

describe('the buffer pool: what it destroys', () => {
  it('a fixed cap below the step: every iteration destroys the step and creates it again', () => {
    const { pool, iteration } = poolOf(4096, false);
    for (let i = 0; i < 6; i++) iteration(i);
    const before = pool.stats();
    iteration(6);
    expect(pool.stats().created - before.created).toBeGreaterThanOrEqual(STEP.length);
    expect(pool.stats().destroyed - before.destroyed).toBeGreaterThanOrEqual(STEP.length);
    expect(pool.stats().idleBytes).toBeLessThanOrEqual(4096 + 64 + 1024 * 7);
  });

  it('a cap that follows the largest live bytes: the step is never destroyed; stale one-off sizes go, oldest first', () => {
    const { pool, made, iteration } = poolOf(4096, true);
    for (let i = 0; i < 10; i++) iteration(i);
    const big = made.filter((b) => b.size === 16384);
    expect(big).toHaveLength(WEIGHTS.length + STEP.length);
    expect(big.every((b) => !b.destroyed)).toBe(true);
    // The cap is the weights' and the step's 80 KiB; idle memory stays within it but for the newest sizes.
    expect(pool.cap()).toBe(5 * 16384);
    expect(pool.stats().idleBytes).toBeLessThanOrEqual(pool.cap());
    // The one-off sizes of earlier iterations were destroyed once the step's and theirs exceeded the cap.
    expect(pool.stats().destroyed).toBeGreaterThan(0);
  });

  it('nothing is destroyed at reads while no buffer is created, whatever the idle bytes', () => {
    const { pool, phase } = poolOf(1024, false);
    phase(STEP, 1);
    phase([64], 20);
    expect(pool.stats().idleBytes).toBeGreaterThan(1024);
    expect(pool.stats().destroyed).toBe(0);
  });
});

describe('BufferPool.hold (a recorded step keeps the buffers its commands name)', () => {
  it('a held buffer is never handed out, free or released while held, and returns when let go', () => {
    const { pool } = poolOf(0, false);
    const [free, live] = [pool.acquire(64), pool.acquire(64)];
    pool.release(free);
    pool.afterSubmit();
    pool.hold(free); // free now: it leaves the free lists
    pool.hold(live); // live now: kept when its tensor lets go
    pool.release(live);
    pool.afterSubmit();
    expect(pool.stats()).toMatchObject({ heldBuffers: 2, heldBytes: 128, idleBuffers: 0, pendingBuffers: 0 });
    const others = [pool.acquire(64), pool.acquire(64), pool.acquire(64)];
    expect(others).not.toContain(free);
    expect(others).not.toContain(live);
    // Two holds on one buffer: it stays held until both let go.
    pool.hold(free);
    pool.unhold(free);
    expect(pool.acquire(64)).not.toBe(free);
    pool.unhold(free);
    pool.unhold(live);
    expect(pool.stats()).toMatchObject({ heldBuffers: 0, heldBytes: 0, pendingBuffers: 2 });
    expect(new Set([pool.acquire(64), pool.acquire(64)])).toEqual(new Set([free, live]));
  });

  it('letting go of a buffer a tensor still holds leaves it with the tensor', () => {
    const { pool } = poolOf(0, false);
    const live = pool.acquire(64);
    pool.hold(live);
    pool.unhold(live);
    expect(pool.stats()).toMatchObject({ heldBuffers: 0, pendingBuffers: 0, idleBuffers: 0 });
    expect(pool.acquire(64)).not.toBe(live);
    expect(() => pool.unhold(live)).toThrow(/did not hold/);
  });
});
