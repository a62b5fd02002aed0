/**
 * A failure that repeats on a timer (a relay pass every 200 ms while Postgres is down) logged at
 * most once per `everyMs`: the first at once, then one line per period with how many were left
 * out, so an outage is visible without one error line per pass.
 */
import type { Logger } from './logger.js';

export class RepeatedFailureLog {
  private lastAt = -Infinity;
  private notLogged = 0;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly everyMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  failed(err: Error): void {
    const now = this.now();
    if (now - this.lastAt < this.everyMs) {
      this.notLogged++;
      return;
    }
    this.logger.error({ err: err.message, ...(this.notLogged > 0 && { failures_not_logged: this.notLogged }) }, this.message);
    this.lastAt = now;
    this.notLogged = 0;
  }
}
