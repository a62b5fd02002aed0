/**
 * A bounded statement the sweep's process runs every `intervalMs`, again and again until it touches
 * fewer rows than its batch: what outlived its purpose goes in slices that hold no lock for long
 * (expired idempotency keys, expired sessions' verification code copies). One pass at a time; a
 * failed pass is logged, and the next interval tries again.
 */
import type { Db } from './pool.js';
import type { Logger } from '../logger.js';

export class PeriodicCleanup {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  /**
   * `sql` takes one parameter, `$1`: the most rows one statement touches. A pass that touched rows
   * is logged at `level` (what it did, and how many).
   */
  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly what: string,
    private readonly sql: string,
    private readonly intervalMs = 60_000,
    private readonly batch = 5_000,
    private readonly level: 'debug' | 'info' | 'warn' = 'debug',
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (!this.running) {
        this.running = this.once().then((rows) => {
          if (rows > 0) this.logger[this.level]({ rows }, this.what);
        }, (err: unknown) => {
          this.logger.error({ err: (err as Error).message }, `${this.what} failed`);
        }).finally(() => {
          this.running = null;
        });
      }
    }, this.intervalMs);
    this.timer.unref();
  }

  /** One pass: the statement until it touches fewer rows than its batch; returns how many in all. */
  async once(): Promise<number> {
    let total = 0;
    for (;;) {
      const { rowCount } = await this.db.query(this.sql, [this.batch]);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < this.batch) {
        return total;
      }
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
