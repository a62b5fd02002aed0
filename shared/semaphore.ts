/** At most `limit` calls of `run` at a time; the others wait in arrival order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private limit: number) {}

  /** Every turn is taken: a caller now would wait. */
  get full(): boolean {
    return this.active >= this.limit;
  }

  /** Calls running now. */
  get running(): number {
    return this.active;
  }

  /** Turns now. */
  get turnLimit(): number {
    return this.limit;
  }

  /**
   * Changes the number of turns. More turns let waiting callers in at once; fewer take effect as
   * running calls end (none is interrupted).
   */
  setLimit(limit: number): void {
    this.limit = limit;
    while (this.active < this.limit && this.waiting.length > 0) {
      this.active++;
      this.waiting.shift()!();
    }
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await fn();
    } finally {
      const next = this.active <= this.limit ? this.waiting.shift() : undefined;
      if (next) {
        next(); // the slot passes straight to the next caller
      } else {
        this.active--; // or it is given up: none waits, or the turns were cut to fewer
      }
    }
  }
}

/** A call that would have had to wait while the waiting calls already hold their byte budget. */
export class TurnsFullError extends Error {
  constructor(readonly waitingBytes: number) {
    super(`${waitingBytes} bytes of calls are already waiting for a turn`);
    this.name = 'TurnsFullError';
  }
}

/**
 * Turns (a Semaphore) for calls that hold memory while they wait (a request body): a call that
 * has to wait is refused with TurnsFullError when the bytes already waiting plus its own would
 * pass `maxWaitingBytes`, so a flood of them cannot grow the queue, and the process, without
 * bound. A call that finds a free turn always runs.
 */
export class BoundedTurns {
  private readonly turns: Semaphore;
  private waitingBytes = 0;

  constructor(limit: number, private readonly maxWaitingBytes: number) {
    this.turns = new Semaphore(limit);
  }

  /** Bytes of the calls waiting now. */
  get waiting(): number {
    return this.waitingBytes;
  }

  /** Calls holding a turn now. */
  get running(): number {
    return this.turns.running;
  }

  /** Turns now. */
  get limit(): number {
    return this.turns.turnLimit;
  }

  /** See `Semaphore.setLimit`. */
  setLimit(limit: number): void {
    this.turns.setLimit(limit);
  }

  async run<T>(bytes: number, fn: () => Promise<T>): Promise<T> {
    if (this.turns.full && this.waitingBytes + bytes > this.maxWaitingBytes) {
      throw new TurnsFullError(this.waitingBytes);
    }
    this.waitingBytes += bytes;
    let waiting = true;
    try {
      return await this.turns.run(() => {
        waiting = false;
        this.waitingBytes -= bytes;
        return fn();
      });
    } finally {
      if (waiting) this.waitingBytes -= bytes;
    }
  }
}
