/**
 * The recovery sweep. Postgres is the truth and Redis only transport: this finds work that is due
 * but may have lost its job (Redis lost data, a process died between commit and enqueue) and adds
 * the job again under its deterministic id, so a job that still exists is not duplicated, and a
 * duplicate that slips through finds nothing to do (every job is idempotent).
 */
import type { Db } from '../shared/db/pool.js';
import type { Logger } from '../shared/logger.js';
import type { Queues } from '../shared/queues.js';
import { stepOf, type FlowStep } from '../shared/channels/index.js';
import { addDispatchJobs, messageJob, recipientJob } from '../shared/engine/dispatch-jobs.js';
import { enqueueBatches } from '../shared/webhooks/jobs.js';

export interface SweepResult {
  dispatch: number;
  webhooks: number;
}

/**
 * Work older than `graceMs` without progress is re-enqueued. A step stays findable until its
 * attempts were handed to a carrier (dispatch clears the marks only then): through the recipient's
 * `due_at` (scheduled, deferred, later flow steps) or its message's `dispatch_pending` (due at
 * acceptance, see `startsLost`). The job that runs again writes what is missing and re-hands
 * attempts that never reached a carrier.
 */
export async function sweepOnce(db: Db, queues: Queues, opts: { graceMs: number; webhookRetries: number }): Promise<SweepResult> {
  const { rows } = await db.query<{ message_id: string; step: number; lane: number; flow: FlowStep[]; ids: number[] }>(
    `SELECT r.message_id, r.step, m.lane, m.flow, array_agg(r.id ORDER BY r.id) AS ids
       FROM (SELECT id, message_id, step FROM recipients
              WHERE state = 'queued' AND due_at < now() - make_interval(secs => $1::float / 1000)
              ORDER BY due_at LIMIT 5000) r
       JOIN messages m ON m.id = r.message_id
      GROUP BY r.message_id, r.step, m.lane, m.flow`,
    [opts.graceMs],
  );
  rows.push(...await startsLost(db, opts.graceMs));
  let dispatch = 0;
  for (const row of rows) {
    const target = { channel: stepOf(row.flow[row.step]!).channel, lane: row.lane };
    const jobs = row.step === 0
      ? [messageJob(target, row.message_id, 0, row.ids)]
      : row.ids.map((id) => recipientJob(target, row.message_id, row.step, id));
    await addDispatchJobs(queues, jobs);
    dispatch += jobs.length;
  }
  const { rows: batches } = await db.query<{ id: number; url: string }>(
    `SELECT id, url FROM webhook_batches WHERE status = 'pending' AND updated_at < now() - make_interval(secs => $1::float / 1000)
      ORDER BY updated_at LIMIT 5000`,
    [Math.max(opts.graceMs, 60_000)],
  );
  // A pending batch with a live job (waiting out its retry delay) keeps that job: same job id.
  await enqueueBatches(queues, batches, opts.webhookRetries);
  return { dispatch, webhooks: batches.length };
}

/**
 * Messages due at acceptance whose recipients were never handed over: their flag is still set. The
 * recipients are found as the rows of the message's account written at the message's created_at
 * (the statement that wrote the message wrote them, so the timestamps are equal). A flag left with
 * no queued recipient behind it (they were handled some other way) is cleared.
 */
async function startsLost(db: Db, graceMs: number): Promise<Array<{ message_id: string; step: number; lane: number; flow: FlowStep[]; ids: number[] }>> {
  const { rows } = await db.query<{ message_id: string; step: number; lane: number; flow: FlowStep[]; ids: number[] }>(
    `SELECT m.id AS message_id, 0 AS step, m.lane, m.flow,
            COALESCE(array_agg(r.id ORDER BY r.id) FILTER (WHERE r.id IS NOT NULL), '{}') AS ids
       FROM (SELECT id, account_id, created_at, lane, flow FROM messages
              WHERE dispatch_pending AND created_at < now() - make_interval(secs => $1::float / 1000)
              ORDER BY created_at LIMIT 1000) m
       LEFT JOIN recipients r ON r.account_id = m.account_id AND r.created_at = m.created_at AND r.message_id = m.id
                             AND r.step = 0 AND r.state = 'queued'
      GROUP BY m.id, m.lane, m.flow`,
    [graceMs],
  );
  const settled = rows.filter((r) => r.ids.length === 0).map((r) => r.message_id);
  if (settled.length > 0) {
    await db.query('UPDATE messages SET dispatch_pending = false WHERE id = ANY($1) AND dispatch_pending', [settled]);
  }
  return rows.filter((r) => r.ids.length > 0);
}

export class RecoverySweep {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly queues: Queues,
    private readonly opts: { intervalMs: number; graceMs: number; webhookRetries: number },
    private readonly logger: Logger,
  ) {}

  start(): void {
    const tick = async () => {
      try {
        const result = await sweepOnce(this.db, this.queues, this.opts);
        if (result.dispatch + result.webhooks > 0) {
          this.logger.info(result, 'recovery sweep re-enqueued work');
        }
      } catch (err) {
        this.logger.error({ err: (err as Error).message }, 'recovery sweep failed');
      }
      this.timer = setTimeout(() => void tick(), this.opts.intervalMs);
      this.timer.unref();
    };
    this.timer = setTimeout(() => void tick(), this.opts.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
  }
}
