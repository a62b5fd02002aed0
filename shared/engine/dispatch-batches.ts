/**
 * Dispatch jobs taken together: the jobs of a lane that a worker process runs at the same moment
 * share their reads and their transaction (`dispatchRuns`), as a database's group commit does.
 *
 * A job's run waits here only while the lane's earlier batch is still reading and writing
 * (`BATCHES_IN_DB` at a time); the runs that arrived meanwhile go together as the next batch, up
 * to `MAX_BATCH_RECIPIENTS` (a larger job goes alone). A batch leaves this wait when its
 * transaction committed: its hand-over to the carriers runs beside the next batch's transaction.
 * So a lone job never waits, and a backlog's jobs cost Postgres one transaction per batch instead
 * of one each (docs/benchmarks.md, "Dispatch jobs taken together").
 *
 * A batch fails as a whole. When it failed before its commit (a read, the transaction), its runs
 * go again one by one, first in the wait: a job whose data makes its dispatch fail then fails
 * alone, and the others go on. After the commit they fail together (a carrier that failed the
 * hand-over; or one job's run whose hold lapsed, as when the process was paused past its lock: its
 * carrier gives that run's attempts back and fails the call), each job retried by BullMQ as any
 * failed job is (every run is safe to run again).
 */
import type { DispatchJob } from '../queues.js';
import { countDispatchBatch } from '../metrics.js';
import type { DispatchOutcome, DispatchRun } from './dispatch.js';

/** A batch's recipients at most, unless its first job alone has more. */
export const MAX_BATCH_RECIPIENTS = 500;
/** Batches of one lane reading and writing at once. */
export const BATCHES_IN_DB = 1;

/** Runs a batch; calls `committed` when it no longer needs the wait (see `dispatchRuns`). */
export type RunBatch = (runs: DispatchRun[], committed: () => void) => Promise<DispatchOutcome[]>;

interface Waiting {
  run: DispatchRun;
  recipients: number;
  /** Goes in a batch of its own (its batch failed before its commit). */
  alone: boolean;
  resolve: (outcome: DispatchOutcome) => void;
  reject: (err: unknown) => void;
}

function recipientsOf(job: DispatchJob): number {
  let n = 0;
  for (const m of job.messages) n += m.recipientIds.length;
  return n;
}

/**
 * The next batch, taken out of `waiting` (oldest first): the oldest run, then the runs after it at
 * the same step (a batch is one step: one transaction's statements), while the recipients stay
 * within `maxRecipients`; a run marked `alone` goes by itself. The oldest always goes, so no run
 * waits for more than the batches before it. Pure apart from removing what it takes.
 */
export function takeBatch<T extends { run: DispatchRun; recipients: number; alone: boolean }>(waiting: T[], maxRecipients: number): T[] {
  const first = waiting[0]!;
  const batch = [first];
  let total = first.recipients;
  let kept = 0;
  for (let i = 1; i < waiting.length; i++) {
    const w = waiting[i]!;
    if (!first.alone && !w.alone && w.run.job.step === first.run.job.step && total + w.recipients <= maxRecipients) {
      batch.push(w);
      total += w.recipients;
    } else {
      waiting[kept++] = w;
    }
  }
  waiting.length = kept;
  return batch;
}

export class DispatchBatcher {
  private readonly waiting: Waiting[] = [];
  private inDb = 0;

  constructor(private readonly runBatch: RunBatch, private readonly maxRecipients = MAX_BATCH_RECIPIENTS, private readonly batchesInDb = BATCHES_IN_DB) {}

  /** Runs one job's run with whatever else waits; settles with its own outcome or its batch's failure. */
  run(run: DispatchRun): Promise<DispatchOutcome> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ run, recipients: recipientsOf(run.job), alone: false, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inDb < this.batchesInDb && this.waiting.length > 0) {
      this.start(takeBatch(this.waiting, this.maxRecipients));
    }
  }

  private start(batch: Waiting[]): void {
    this.inDb++;
    countDispatchBatch(batch.length);
    let released = false;
    let committed = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.inDb--;
      this.pump();
    };
    let settled: Promise<DispatchOutcome[]>;
    try {
      settled = this.runBatch(batch.map((w) => w.run), () => {
        committed = true;
        release();
      });
    } catch (err) {
      settled = Promise.reject(err);
    }
    settled.then(
      (outcomes) => {
        release();
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(outcomes[i]!);
      },
      (err: unknown) => {
        if (batch.length > 1 && !committed) {
          // Each again on its own, ahead of the runs that came later.
          for (const w of batch) w.alone = true;
          this.waiting.unshift(...batch);
          release();
          return;
        }
        release();
        for (const w of batch) w.reject(err);
      },
    );
  }
}
