/**
 * The recovery sweep. Postgres is the truth and Redis only transport: this finds work that is due
 * but may have lost its job (Redis lost data, a process died between commit and enqueue) and adds
 * the job again under its deterministic id, so a job that still exists is not duplicated, and a
 * duplicate that slips through finds nothing to do (every job is idempotent).
 */
import type { Db } from '../shared/db/pool.js';
import type { Logger } from '../shared/logger.js';
import { randomUUID } from 'node:crypto';
import { luaScript, runScript, type Redis } from '../shared/redis.js';
import { STATUS_JOB_OPTIONS, type Queues, type StatusJob } from '../shared/queues.js';
import type { TtlTimers } from '../shared/engine/ttl-timers.js';
import { CHANNEL_MODULES, isChannel, stepOf, type AttemptState, type FlowStep } from '../shared/channels/index.js';
import { stepTtlMinutes } from '../shared/engine/transitions.js';
import { addDispatchJobs, callJob, messageJob, recipientJob } from '../shared/engine/dispatch-jobs.js';
import { enqueueBatches } from '../shared/webhooks/jobs.js';

interface LostStep {
  message_id: string;
  request_id: string;
  step: number;
  lane: number;
  flow: FlowStep[];
  ids: number[];
  /** Due at acceptance: its step was in the call's job. */
  at_acceptance: boolean;
}

export interface SweepResult {
  dispatch: number;
  /** Of those, jobs that had failed for good (their retries ran out during an outage) and were replaced. */
  replaced: number;
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
  const { rows } = await db.query<LostStep>(
    `SELECT r.message_id, m.request_id, r.step, m.lane, m.flow, array_agg(r.id ORDER BY r.id) AS ids, false AS at_acceptance
       FROM (SELECT id, message_id, step FROM recipients
              WHERE state = 'queued' AND due_at < now() - make_interval(secs => $1::float / 1000)
              ORDER BY due_at LIMIT 5000) r
       JOIN messages m ON m.id = r.message_id
      GROUP BY r.message_id, m.request_id, r.step, m.lane, m.flow`,
    [opts.graceMs],
  );
  rows.push(...await startsLost(db, opts.graceMs));
  let dispatch = 0;
  let replaced = 0;
  for (const row of rows) {
    const target = { channel: stepOf(row.flow[row.step]!).channel, lane: row.lane };
    // Under the id of the job that would have run it: the call's job for a message due at
    // acceptance, the message's own for a scheduled or deferred one, the recipient's for a later
    // step. A job still waiting under that id (a backlog) makes adding it a no-op.
    const jobs = row.at_acceptance
      ? [callJob(target, row.request_id, { messageId: row.message_id, recipientIds: row.ids })]
      : row.step === 0
        ? [messageJob(target, row.message_id, 0, row.ids)]
        : row.ids.map((id) => recipientJob(target, row.message_id, row.step, id));
    replaced += (await addDispatchJobs(queues, jobs, { replaceFailed: true })).replaced;
    dispatch += jobs.length;
  }
  const { rows: batches } = await db.query<{ id: number; url: string }>(
    `SELECT id, url FROM webhook_batches WHERE status = 'pending' AND updated_at < now() - make_interval(secs => $1::float / 1000)
      ORDER BY updated_at LIMIT 5000`,
    [Math.max(opts.graceMs, 60_000)],
  );
  // A pending batch with a live job (waiting out its retry delay) keeps that job: same job id.
  await enqueueBatches(queues, batches, opts.webhookRetries);
  return { dispatch, replaced, webhooks: batches.length };
}

/**
 * Messages due at acceptance whose recipients were never handed over: their flag is still set. The
 * recipients are found as the rows of the message's account written at the message's created_at
 * (the statement that wrote the message wrote them, so the timestamps are equal). A flag left with
 * no queued recipient behind it (they were handled some other way) is cleared.
 */
async function startsLost(db: Db, graceMs: number): Promise<LostStep[]> {
  const { rows } = await db.query<LostStep>(
    `SELECT m.id AS message_id, m.request_id, 0 AS step, m.lane, m.flow, true AS at_acceptance,
            COALESCE(array_agg(r.id ORDER BY r.id) FILTER (WHERE r.id IS NOT NULL), '{}') AS ids
       FROM (SELECT id, request_id, account_id, created_at, lane, flow FROM messages
              WHERE dispatch_pending AND created_at < now() - make_interval(secs => $1::float / 1000)
              ORDER BY created_at LIMIT 1000) m
       LEFT JOIN recipients r ON r.account_id = m.account_id AND r.created_at = m.created_at AND r.message_id = m.id
                             AND r.step = 0 AND r.state = 'queued'
      GROUP BY m.id, m.request_id, m.lane, m.flow`,
    [graceMs],
  );
  const settled = rows.filter((r) => r.ids.length === 0).map((r) => r.message_id);
  if (settled.length > 0) {
    await db.query('UPDATE messages SET dispatch_pending = false WHERE id = ANY($1) AND dispatch_pending', [settled]);
  }
  return rows.filter((r) => r.ids.length > 0);
}

interface WaitingAttempt {
  id: number;
  channel: string;
  state: AttemptState;
  step: number;
  created_ms: number;
  handed_ms: number | null;
  /** The message's flow; null for an attempt no longer `sending` or `sent` (not read). */
  flow: FlowStep[] | null;
}

/**
 * Attempts nothing may move again otherwise: their ttl timer was lost with Redis, or their carrier
 * never answered. Walks the attempts by id from a cursor kept in Redis, up to `limit` per call (a
 * page; `sweepWaitingPages` pages on) and never past one made less than `boundMs` ago (default
 * 72 h: RECEIPT_WAIT_HOURS):
 * - a step that succeeds at `delivered` (Viber, WhatsApp) still `sending` or `sent`: its ttl timer
 *   is set again (one that still exists is kept), due when the ttl ends, so the step ends
 *   `undelivered` (`[1] TTL expired`) and the flow moves on;
 * - an SMS still `sending` (its submit was never answered): `failed`, `[3] No answer from the
 *   carrier`, refunded (D3);
 * - an SMS `sent` without a receipt stays `sent`: its step succeeded (D3) and the spec allows that
 *   no final state ever comes; nothing waits for it any more.
 */
export async function sweepWaitingAttempts(
  db: Db, redis: Redis, queues: Queues, timers: Pick<TtlTimers, 'set'>,
  opts: { boundMs: number; cursorKey: string; limit?: number; now?: number },
): Promise<{ checked: number; ttlTimers: number; failed: number; more: boolean }> {
  const now = opts.now ?? Date.now();
  const limit = opts.limit ?? 2000;
  const cursor = Number(await redis.get(opts.cursorKey) ?? 0);
  // $1: the cursor (the last attempt id walked); $2: the page size. Only attempts still `sending`
  // or `sent` have their message's flow read (their step's ttl), by a subquery the CASE runs for
  // them alone; the rest are only walked past (docs/benchmarks.md, "Measurements behind the code").
  const { rows } = await db.query<WaitingAttempt>(
    `SELECT a.id, a.channel, a.state, a.step, (extract(epoch FROM a.created_at) * 1000)::float8 AS created_ms,
            (extract(epoch FROM a.handed_at) * 1000)::float8 AS handed_ms,
            CASE WHEN a.state IN ('sending', 'sent')
                 THEN (SELECT m.flow FROM recipients r JOIN messages m ON m.id = r.message_id WHERE r.id = a.recipient_id) END AS flow
       FROM attempts a
      WHERE a.id > $1
      ORDER BY a.id
      LIMIT $2`,
    [cursor, limit],
  );
  let last = cursor;
  let ttlTimers = 0;
  const failed: number[] = [];
  for (const a of rows) {
    if (now - a.created_ms < opts.boundMs) break;
    last = a.id;
    if ((a.state !== 'sending' && a.state !== 'sent') || !isChannel(a.channel)) continue;
    if (CHANNEL_MODULES[a.channel].succeedsAt === 'sent') {
      if (a.state === 'sending') failed.push(a.id);
      continue;
    }
    const due = (a.handed_ms ?? a.created_ms) + stepTtlMinutes(a.flow ?? [], a.step) * 60_000;
    await timers.set([a.id], due, 'keep');
    ttlTimers++;
  }
  // Each in its attempt's status partition (one attempt's reports are applied in one order).
  for (const attemptId of failed) {
    const reports = [{ attemptId, state: 'failed' as const, resultInfo: '[3] No answer from the carrier', at: now }];
    await queues.statusQueueFor(attemptId).add('reports', { kind: 'reports', reports } satisfies StatusJob, STATUS_JOB_OPTIONS);
  }
  if (last !== cursor) await redis.set(opts.cursorKey, String(last));
  // A full page walked to its end: attempts old enough may follow it.
  const more = rows.length === limit && last === rows[rows.length - 1]!.id;
  return { checked: rows.length, ttlTimers, failed: failed.length, more };
}

/**
 * `sweepWaitingAttempts` page after page until the cursor reaches attempts younger than the bound,
 * or for `budgetMs`: a page per sweep (2,000 every 30 s, 67 a second) would fall further behind
 * every day a deployment sends more than that, and walking from the start again after Redis lost
 * the cursor would take weeks.
 */
export async function sweepWaitingPages(
  db: Db, redis: Redis, queues: Queues, timers: Pick<TtlTimers, 'set'>,
  opts: { boundMs: number; cursorKey: string; budgetMs: number; limit?: number },
): Promise<{ checked: number; ttlTimers: number; failed: number; pages: number }> {
  const until = Date.now() + opts.budgetMs;
  const total = { checked: 0, ttlTimers: 0, failed: 0, pages: 0 };
  for (;;) {
    const page = await sweepWaitingAttempts(db, redis, queues, timers, opts);
    total.checked += page.checked;
    total.ttlTimers += page.ttlTimers;
    total.failed += page.failed;
    total.pages++;
    if (!page.more || Date.now() >= until) return total;
  }
}

/** How long one recovery sweep may walk pages of attempts (`sweepWaitingPages`). */
const WAITING_SWEEP_BUDGET_MS = 5000;

/**
 * Releases the walk's lock if it is still the caller's.
 * KEYS[1]  the lock (`<prefix>:sweep:waiting-attempts:lock`)
 * ARGV[1]  the caller's token, as it took the lock
 * Returns  1 when released, 0 when the lock had expired or another process holds it
 */
const RELEASE_LOCK = luaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`);

export class RecoverySweep {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly redis: Redis,
    private readonly queues: Queues,
    private readonly timers: Pick<TtlTimers, 'set'>,
    private readonly opts: { intervalMs: number; graceMs: number; webhookRetries: number; receiptWaitMs: number; redisPrefix: string },
    private readonly logger: Logger,
  ) {}

  start(): void {
    const tick = async () => {
      try {
        const result = await sweepOnce(this.db, this.queues, this.opts);
        if (result.dispatch + result.webhooks > 0) {
          this.logger.info(result, 'recovery sweep re-enqueued work');
        }
        // One process at a time walks the cursor (several status roles would walk the same pages
        // and set the cursor back and forth): the one that takes the lock, for the walk's budget
        // and a margin (a process that dies holding it delays the next walk by that much).
        const cursorKey = `${this.opts.redisPrefix}:sweep:waiting-attempts`;
        const lock = `${cursorKey}:lock`;
        const token = randomUUID();
        if (await this.redis.set(lock, token, 'PX', WAITING_SWEEP_BUDGET_MS + 10_000, 'NX') === 'OK') {
          try {
            const waiting = await sweepWaitingPages(this.db, this.redis, this.queues, this.timers, {
              boundMs: this.opts.receiptWaitMs, cursorKey, budgetMs: WAITING_SWEEP_BUDGET_MS,
            });
            if (waiting.ttlTimers + waiting.failed > 0) {
              this.logger.info(waiting, 'recovery sweep settled attempts that waited too long');
            }
          } finally {
            await runScript(this.redis, RELEASE_LOCK, [lock], [token]).catch(() => undefined);
          }
        }
      } catch (err) {
        // Work stays findable in Postgres: the next sweep tries again.
        this.logger.warn({ err: (err as Error).message, code: (err as { code?: string }).code }, 'recovery sweep could not re-enqueue work; trying again next sweep');
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
