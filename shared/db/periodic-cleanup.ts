/**
 * Work the sweep's process does every `intervalMs`: one pass at a time; a pass that did something
 * is logged at `level` (what it did, how many rows, and its `detail`), a failed pass is logged,
 * and the next interval tries again. A pass made of several statements looks at `stopping` between
 * them: a shutdown waits for the statement under way, not for the rest of a long pass (a backlog of
 * rows to delete can take minutes, and the process's other roles stop after this one).
 */
import type { Db } from './pool.js';
import type { Logger } from '../logger.js';

export abstract class PeriodicPass {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** Set by `stop()`: a pass ends after the statement under way. */
  protected stopping = false;

  constructor(
    protected readonly logger: Logger,
    private readonly what: string,
    private readonly intervalMs: number,
    private readonly level: 'debug' | 'info' | 'warn',
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!this.running) {
        this.running = this.once().then((rows) => {
          if (rows > 0) this.logger[this.level]({ rows, ...this.detail() }, this.what);
        }, (err: unknown) => {
          this.logger.error({ err: (err as Error).message }, `${this.what} failed`);
        }).finally(() => {
          this.running = null;
        });
      }
    }, this.intervalMs);
    this.timer.unref();
  }

  /** One pass; returns how many rows it touched. */
  abstract once(): Promise<number>;

  /** What the last pass did beyond its row count, logged with it (e.g. rows per table); none by default. */
  protected detail(): Record<string, number> {
    return {};
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}

/**
 * A bounded statement run again and again until it touches fewer rows than its batch: what outlived
 * its purpose goes in slices that hold no lock for long (expired idempotency keys, expired
 * sessions' verification code copies).
 */
export class PeriodicCleanup extends PeriodicPass {
  /**
   * `sql` takes one parameter, `$1`: the most rows one statement touches. A pass that touched rows
   * is logged at `level` (what it did, and how many).
   */
  constructor(
    private readonly db: Db,
    logger: Logger,
    what: string,
    private readonly sql: string,
    intervalMs = 60_000,
    private readonly batch = 5_000,
    level: 'debug' | 'info' | 'warn' = 'debug',
  ) {
    super(logger, what, intervalMs, level);
  }

  /** One pass: the statement until it touches fewer rows than its batch; returns how many in all. */
  async once(): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.db.query(this.sql, [this.batch]);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < this.batch || this.stopping) {
        return total;
      }
    }
  }
}
