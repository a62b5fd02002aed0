/**
 * The turns large send calls take in one API process (`api/routes/send.ts`).
 *
 * A large call (a batch body over 2 KB) holds a turn from its parsing to its enqueue. While small
 * calls arrive (single messages, verification starts: the OTPs), large calls get `narrow` turns,
 * so that their parsing and writing never pile up in the event loop ahead of a small call. Once no
 * small call has come for `quietMs`, there is no latency to protect and large calls get `wide`
 * turns: with bulk calls alone, 4 turns against 2 accepted 10-30 % more recipients per second
 * (docs/benchmarks.md), and under a backlog with OTPs among it they cost the OTPs' p99 up to 3.5x.
 * The first small call after a quiet spell narrows them at once; the large calls already running
 * finish, and no new one starts until fewer than `narrow` run.
 */
import { BoundedTurns } from '../semaphore.js';

export interface LargeCallPolicy {
  /** Turns while small calls arrive (ACCEPT_LARGE_CALL_CONCURRENCY). */
  narrow: number;
  /** Turns once no small call has come for `quietMs` (ACCEPT_LARGE_CALL_CONCURRENCY_ALONE). */
  wide: number;
  quietMs: number;
}

/** How long without a small call before large calls get their wide turns. */
export const SMALL_CALL_QUIET_MS = 60_000;

/** The turns large calls get now, given when the last small call came (null: none yet). Pure. */
export function largeCallLimit(policy: LargeCallPolicy, nowMs: number, lastSmallCallAtMs: number | null): number {
  return lastSmallCallAtMs !== null && nowMs - lastSmallCallAtMs < policy.quietMs ? policy.narrow : policy.wide;
}

export class LargeCallTurns {
  private lastSmallCallAt: number | null = null;
  private readonly turns: BoundedTurns;

  /**
   * `backlogBytes`: bodies that may wait for a turn (see `BoundedTurns`). `onChange`: told the new
   * number of turns when it changes (a log line for the operator; at most once per quiet spell).
   */
  constructor(
    private readonly policy: LargeCallPolicy,
    backlogBytes: number,
    private readonly onChange: (turns: number) => void = () => undefined,
    private readonly clock: () => number = Date.now,
  ) {
    this.turns = new BoundedTurns(largeCallLimit(policy, clock(), null), backlogBytes);
  }

  /** A small call has come: large calls are back to their narrow turns. */
  smallCall(): void {
    this.lastSmallCallAt = this.clock();
    this.setLimit(this.policy.narrow);
  }

  /** Runs a large call of `bytes` in its turn (may throw `TurnsFullError`, as `BoundedTurns`). */
  run<T>(bytes: number, fn: () => Promise<T>): Promise<T> {
    this.setLimit(largeCallLimit(this.policy, this.clock(), this.lastSmallCallAt));
    return this.turns.run(bytes, fn);
  }

  private setLimit(limit: number): void {
    if (limit === this.turns.limit) return;
    this.turns.setLimit(limit);
    this.onChange(limit);
  }

  /** Turns large calls have now (as of the last call). */
  get limit(): number {
    return this.turns.limit;
  }

  /** Large calls holding a turn now. */
  get running(): number {
    return this.turns.running;
  }

  /** Bytes of large calls waiting for a turn now. */
  get waiting(): number {
    return this.turns.waiting;
  }
}
