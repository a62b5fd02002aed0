/**
 * The status intake: carrier reports applied in the process that received them, in load-sized
 * batches, with the status queues as the fallback when a batch cannot be applied (see below).
 */
import type { StatusReport } from '../carriers/types.js';
import type { Logger } from '../logger.js';

const RETRY_PAUSE_MS = 100;

/**
 * Carrier reports are applied where they arrive, in batches: while one batch's transaction runs,
 * the reports that come in meanwhile wait and then go together in the next one, so the batch size
 * follows the load (one report when idle, hundreds under a burst) and one transaction per batch
 * serves them all. One batch at a time per process keeps the reports of one attempt in the order
 * they arrived. `push` resolves once its reports are committed (`true`), or queued (`false`, see
 * below): a carrier acknowledges a receipt to its peer only after that. A batch that fails is
 * tried once more; when it still cannot be applied (Postgres down, a lock held too long), its
 * reports go to the status queues instead, whose pool retries them for hours; `push` rejects
 * only when neither worked. Reports queued so may then be applied after later ones (the state path
 * still ignores moves backwards).
 */
export class StatusIntake {
  private buffer: Array<{ reports: StatusReport[]; resolve: (applied: boolean) => void; reject: (err: unknown) => void }> = [];
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly apply: (reports: StatusReport[]) => Promise<unknown>,
    private readonly enqueue: (reports: StatusReport[]) => Promise<void>,
    private readonly logger: Logger,
    private readonly lingerMs = 2,
    private readonly maxBatch = 2000,
  ) {}

  push(reports: StatusReport[]): Promise<boolean> {
    if (reports.length === 0) {
      return Promise.resolve(true);
    }
    const done = new Promise<boolean>((resolve, reject) => this.buffer.push({ reports, resolve, reject }));
    // An idle intake waits a moment for company; a busy one starts the next batch when the running one ends.
    if (!this.running && !this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.start();
      }, this.lingerMs);
    }
    return done;
  }

  /** Resolves once every report pushed so far has been applied or queued. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.start();
    while (this.running) {
      await this.running;
    }
  }

  private start(): void {
    if (this.running) {
      return;
    }
    this.running = this.drain().finally(() => {
      this.running = null;
      // Reports pushed after the drain's last look, before this callback ran.
      if (this.buffer.length > 0) {
        this.start();
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      const taken: typeof this.buffer = [];
      let count = 0;
      while (this.buffer.length > 0 && (taken.length === 0 || count + this.buffer[0]!.reports.length <= this.maxBatch)) {
        const entry = this.buffer.shift()!;
        taken.push(entry);
        count += entry.reports.length;
      }
      const reports: StatusReport[] = [];
      for (const t of taken) {
        for (const r of t.reports) {
          reports.push(r);
        }
      }
      // Once more after a pause (a deadlock victim, a dropped connection), then to the queues.
      let applied = false;
      for (let attempt = 0; attempt < 2 && !applied; attempt++) {
        try {
          if (attempt > 0) {
            await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
          }
          await this.apply([...reports]); // a copy: applying appends the receipts it releases
          applied = true;
        } catch (err) {
          this.logger.warn({ err: (err as Error).message, count, attempt }, 'status batch not applied');
        }
      }
      if (applied) {
        for (const t of taken) t.resolve(true);
        continue;
      }
      try {
        await this.enqueue(reports);
        for (const t of taken) t.resolve(false);
      } catch (err) {
        this.logger.error({ err: (err as Error).message, count }, 'status intake could not apply or queue reports');
        taken.forEach((t) => t.reject(err));
      }
    }
  }
}
