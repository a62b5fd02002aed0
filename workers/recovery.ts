/**
 * The recovery sweep. Postgres is the truth and Redis only transport: this finds work that is due
 * but may have lost its job (Redis lost data, a process died between commit and enqueue) and adds
 * the job again under its deterministic id, so a job that still exists is not duplicated, and a
 * duplicate that slips through finds nothing to do (every job is idempotent).
 */
import type { Db } from '../shared/db/pool.js';
import type { StatusReport } from '../shared/carriers/types.js';
import type { Logger } from '../shared/logger.js';
import { randomUUID } from 'node:crypto';
import { luaScript, runScript, type Redis } from '../shared/redis.js';
import { STATUS_JOB_OPTIONS, type Queues, type StatusJob } from '../shared/queues.js';
import type { RearmRange, TtlTimers } from '../shared/engine/ttl-timers.js';
import { CHANNEL_MODULES, isChannel, stepOf, type AttemptState, type FlowStep } from '../shared/channels/index.js';
import { defaultResultInfo, stepTtlMinutes } from '../shared/engine/transitions.js';
import { MAX_TTL_MINUTES } from '../shared/channels/fields.js';
import { addDispatchJobs, callJob, messageJob, recipientJob, type QueuedDispatchJob } from '../shared/engine/dispatch-jobs.js';
import { enqueueBatches } from '../shared/webhooks/jobs.js';
import { CONFIRM_GONE_MS, DEAD_HOLDER_GRACE_MS, goneHolders, liveHolders } from '../shared/webhooks/holders.js';

interface LostStep {
  message_id: string;
  request_id: string;
  step: number;
  lane: number;
  flow: FlowStep[];
  /** The recipients' ids: an int8[], which pg returns as text (shared/db/pool.ts parses only a scalar int8). */
  ids: string[];
  /** Due at acceptance: its step was in the call's job. */
  at_acceptance: boolean;
}

export interface SweepResult {
  dispatch: number;
  /** Of those, jobs that had failed for good (their retries ran out during an outage) and were replaced. */
  replaced: number;
  webhooks: number;
}

export interface SweepOptions {
  graceMs: number;
  webhookRetries: number;
  /** Which webhook batch holders are alive (holders.ts); without it, none counts as gone. */
  liveHolders?: (ids: string[]) => Promise<Set<string>>;
  /** The second look at a missing holder key (default CONFIRM_GONE_MS). */
  confirmGoneMs?: number;
  /** Aborts the wait between the two looks (the process stops). */
  signal?: AbortSignal;
  /** The holder keys could not be read (their batches wait for the one-minute rule). */
  onHolderReadError?: (err: Error) => void;
}

/**
 * Work older than `graceMs` without progress is re-enqueued. A step stays findable until its
 * attempts were handed to a carrier (dispatch clears the marks only then): through the recipient's
 * `due_at` (scheduled, deferred, later flow steps) or its message's `dispatch_pending` (due at
 * acceptance, see `startsLost`). The job that runs again writes what is missing and re-hands
 * attempts that never reached a carrier. A pending webhook batch is queued after a minute without
 * progress, or as soon as `liveHolders` says the process that held it is gone (holders.ts; without
 * it, every holder counts as alive).
 */
export async function sweepOnce(db: Db, queues: Queues, opts: SweepOptions): Promise<SweepResult> {
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
  const jobs: QueuedDispatchJob[] = [];
  // The lost messages of one call on one queue, in one call job: every job of a call has the
  // call's id, so one job per message kept only the first of them (BullMQ adds one job per id)
  // and the sweep recovered one message of a call per pass.
  const callJobs = new Map<string, QueuedDispatchJob>();
  for (const row of rows) {
    const target = { channel: stepOf(row.flow[row.step]!).channel, lane: row.lane };
    const ids = row.ids.map(Number); // as acceptance writes them into a job
    // Under the id of the job that would have run it: the call's job for a message due at
    // acceptance, the message's own for a scheduled or deferred one, the recipient's for a later
    // step. A job still waiting under that id (a backlog) makes adding it a no-op.
    if (row.at_acceptance) {
      const job = callJob(target, row.request_id, { messageId: row.message_id, recipientIds: ids });
      const key = `${job.queue}\n${row.request_id}`;
      const same = callJobs.get(key);
      if (same) same.data.messages.push(...job.data.messages);
      else callJobs.set(key, job);
    } else if (row.step === 0) {
      jobs.push(messageJob(target, row.message_id, 0, ids));
    } else {
      jobs.push(...ids.map((id) => recipientJob(target, row.message_id, row.step, id)));
    }
  }
  jobs.push(...callJobs.values());
  const { replaced } = await addDispatchJobs(queues, jobs, { replaceFailed: true });
  const dispatch = jobs.length;
  // $1: ms without progress after which a pending batch is queued whoever holds it.
  const staleMs = Math.max(opts.graceMs, 60_000);
  const { rows: stale } = await db.query<{ id: number; url: string }>(
    `SELECT id, url FROM webhook_batches WHERE status = 'pending' AND updated_at < now() - make_interval(secs => $1::float / 1000)
      ORDER BY updated_at LIMIT 5000`,
    [staleMs],
  );
  const orphaned = await batchesOfGoneHolders(db, staleMs, opts);
  const batches = [...stale, ...orphaned];
  // A pending batch with a live job (waiting out its retry delay) keeps that job: same job id.
  await enqueueBatches(queues, batches, opts.webhookRetries);
  return { dispatch, replaced, webhooks: batches.length };
}

/**
 * Pending batches younger than `staleMs` (and at least DEAD_HOLDER_GRACE_MS old) whose holder is
 * gone: their holders read first, so that any number of live holders' batches cannot hide them.
 * $1: `staleMs`; $2: DEAD_HOLDER_GRACE_MS; $3: the gone holders. Both use the index
 * webhook_batches_pending (updated_at, pending only).
 */
async function batchesOfGoneHolders(db: Db, staleMs: number, opts: SweepOptions): Promise<Array<{ id: number; url: string }>> {
  if (!opts.liveHolders) return [];
  const window = `status = 'pending' AND updated_at >= now() - make_interval(secs => $1::float / 1000)
         AND updated_at < now() - make_interval(secs => $2::float / 1000)`;
  const { rows: held } = await db.query<{ holder: string }>(
    `SELECT DISTINCT holder FROM webhook_batches WHERE ${window} AND holder IS NOT NULL`, [staleMs, DEAD_HOLDER_GRACE_MS]);
  const gone = await goneHolders(held.map((h) => h.holder), opts.liveHolders, {
    confirmMs: opts.confirmGoneMs ?? CONFIRM_GONE_MS, signal: opts.signal, onError: opts.onHolderReadError,
  });
  if (gone.length === 0) return [];
  const { rows } = await db.query<{ id: number; url: string }>(
    `SELECT id, url FROM webhook_batches WHERE ${window} AND holder = ANY($3::text[]) ORDER BY updated_at LIMIT 5000`,
    [staleMs, DEAD_HOLDER_GRACE_MS, gone]);
  return rows;
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

/** An attempt as the walks over attempts read it (`attemptPage`). */
export interface WalkedAttempt {
  id: number;
  channel: string;
  state: AttemptState;
  step: number;
  created_ms: number;
  handed_ms: number | null;
  /** The message's flow; null for an attempt no longer `sending` or `sent` (not read). */
  flow: FlowStep[] | null;
  /** Whether a part's carrier ref is registered; null for an attempt not an SMS still `sending` (not read). */
  parts_out: boolean | null;
}

/** What a walk does with one page of attempts (`planAttemptPage`). */
export interface PagePlan {
  /** How many of the page's attempts were walked (the rest are too young for the bound). */
  walked: number;
  /** The last attempt walked, or null when none was. */
  last: number | null;
  /** Ttl timers to set, keeping any that exists: `[attempt id, due at ms]`. */
  timers: Array<[number, number]>;
  /** SMS attempts whose submit was never answered, to fail (refunded: nothing left). */
  failed: number[];
  /**
   * SMS attempts whose hand-over stopped after the carrier accepted some of their parts (a long
   * message), to fail after `sent`: parts left, so they stay charged (D3).
   */
  partlySent: number[];
}

/**
 * What to do with a page of attempts (in id order), a pure rule. `boundMs` is the waiting walk's
 * (attempts at least that old, `sweepWaitingAttempts`): it stops at the first younger attempt, and
 * an SMS still `sending` then fails. `boundMs` null is the walk after Redis lost the timers
 * (`rearmLostTimers`): every attempt of the page is walked, and only timers are set. An SMS failed
 * so whose parts partly left (a long message's hand-over stopped midway) is `partlySent`. Either
 * way a step that succeeds at `delivered` (Viber, WhatsApp) still `sending` or `sent` gets its ttl timer,
 * due when its ttl ends counted from the hand-over (in the waiting walk from the attempt's creation
 * if none is recorded; after a loss such an attempt is left to the dispatch job that will hand it
 * over); an SMS `sent` without a receipt stays as it is (its step succeeded, D3).
 */
export function planAttemptPage(rows: readonly WalkedAttempt[], opts: { now: number; boundMs: number | null }): PagePlan {
  const plan: PagePlan = { walked: 0, last: null, timers: [], failed: [], partlySent: [] };
  for (const a of rows) {
    if (opts.boundMs !== null && opts.now - a.created_ms < opts.boundMs) break;
    plan.walked++;
    plan.last = a.id;
    if ((a.state !== 'sending' && a.state !== 'sent') || !isChannel(a.channel)) continue;
    if (CHANNEL_MODULES[a.channel].succeedsAt === 'sent') {
      if (a.state === 'sending' && opts.boundMs !== null) (a.parts_out === true ? plan.partlySent : plan.failed).push(a.id);
      continue;
    }
    // After a loss, an attempt whose hand-over is not recorded yet is its dispatch job's: that job
    // (still queued, or added again by `sweepOnce`) sets the timer when it hands it over.
    if (a.handed_ms === null && opts.boundMs === null) continue;
    plan.timers.push([a.id, (a.handed_ms ?? a.created_ms) + stepTtlMinutes(a.flow ?? [], a.step) * 60_000]);
  }
  return plan;
}

/**
 * Up to `limit` attempts with ids in (`after`, `upTo`], in id order. $1: after; $2: the page size;
 * $3: upTo. Only attempts still `sending` or `sent` have their message's flow read (their step's
 * ttl), by a subquery the CASE runs for them alone; the rest are only walked past
 * (docs/benchmarks.md, "Measurements behind the code"). Likewise only SMS attempts still `sending`
 * are looked up in `carrier_refs` (index `carrier_refs_attempt`): did any part leave? An SMS
 * carrier registers a part's ref only once the carrier took the part (SMPP: its submit_sm_resp;
 * the sandbox registers none); a carrier that registered refs before would need its own test here.
 */
async function attemptPage(db: Db, after: number, upTo: number, limit: number): Promise<WalkedAttempt[]> {
  const { rows } = await db.query<WalkedAttempt>(
    `SELECT a.id, a.channel, a.state, a.step, (extract(epoch FROM a.created_at) * 1000)::float8 AS created_ms,
            (extract(epoch FROM a.handed_at) * 1000)::float8 AS handed_ms,
            CASE WHEN a.state IN ('sending', 'sent')
                 THEN (SELECT m.flow FROM recipients r JOIN messages m ON m.id = r.message_id WHERE r.id = a.recipient_id) END AS flow,
            CASE WHEN a.state = 'sending' AND a.channel = 'sms'
                 THEN EXISTS (SELECT 1 FROM carrier_refs c WHERE c.attempt_id = a.id) END AS parts_out
       FROM attempts a
      WHERE a.id > $1 AND a.id <= $3
      ORDER BY a.id
      LIMIT $2`,
    [after, limit, upTo],
  );
  return rows;
}

/**
 * A waiting walk that lost its cursor starts this long before its bound (`sweepWaitingAttempts`):
 * the walk keeps up with its bound at every sweep, so older attempts were walked unless no sweep
 * ran for a week (a stopped sweep role an operator would have seen in its metrics and logs).
 */
export const WAITING_RESTART_MARGIN_MS = 7 * 24 * 3_600_000;

/** Why the waiting walk fails an SMS its carrier never answered. */
const NO_ANSWER_INFO = '[3] No answer from the carrier';

/**
 * Attempts nothing may move again otherwise: their ttl timer was lost with Redis, or their carrier
 * never answered. Walks the attempts by id from a cursor kept in Redis, up to `limit` per call (a
 * page; `sweepWaitingPages` pages on) and never past one made less than `boundMs` ago (default
 * 72 h: RECEIPT_WAIT_HOURS), as `planAttemptPage` says. Without a cursor (a first start, or Redis
 * lost it) the walk starts at the attempts made `restartMarginMs` (a week) before the bound: the
 * older ones were walked before, and walking every attempt ever made again would keep the walk
 * from newer ones for hours on a large table:
 * - a step that succeeds at `delivered` (Viber, WhatsApp) still `sending` or `sent`: its ttl timer
 *   is set again (one that still exists is kept), due when the ttl ends, so the step ends
 *   `undelivered` (`[1] TTL expired`) and the flow moves on;
 * - an SMS still `sending` (its submit was never answered): `failed`, `[3] No answer from the
 *   carrier`, refunded (D3); one whose parts partly left (a part's ref registered: a long message
 *   whose hand-over stopped midway) passes through `sent` and stays charged;
 * - an SMS `sent` without a receipt stays `sent`: its step succeeded (D3) and the spec allows that
 *   no final state ever comes; nothing waits for it any more.
 */
export async function sweepWaitingAttempts(
  db: Db, redis: Redis, queues: Queues, timers: Pick<TtlTimers, 'setEachKeep'>,
  opts: { boundMs: number; cursorKey: string; limit?: number; now?: number; restartMarginMs?: number },
): Promise<{ checked: number; ttlTimers: number; failed: number; more: boolean; restartedAfter: number | null }> {
  const now = opts.now ?? Date.now();
  const limit = opts.limit ?? 2000;
  const stored = await redis.get(opts.cursorKey);
  const restartedAfter = stored !== null ? null
    : await restartCursor(db, redis, opts.cursorKey, now - opts.boundMs - (opts.restartMarginMs ?? WAITING_RESTART_MARGIN_MS));
  const cursor = restartedAfter ?? Number(stored);
  const rows = await attemptPage(db, cursor, Number.MAX_SAFE_INTEGER, limit);
  const plan = planAttemptPage(rows, { now, boundMs: opts.boundMs });
  await timers.setEachKeep(plan.timers);
  // Each in its attempt's status partition (one attempt's reports are applied in one order); a
  // partly sent SMS passes through `sent`, so it stays charged.
  for (const attemptId of [...plan.failed, ...plan.partlySent]) {
    const reports: StatusReport[] = [{ attemptId, state: 'failed', resultInfo: NO_ANSWER_INFO, at: now }];
    if (plan.partlySent.includes(attemptId)) reports.unshift({ attemptId, state: 'sent', resultInfo: defaultResultInfo('sent'), at: now });
    await queues.statusQueueFor(attemptId).add('reports', { kind: 'reports', reports } satisfies StatusJob, STATUS_JOB_OPTIONS);
  }
  if (plan.last !== null) await redis.set(opts.cursorKey, String(plan.last));
  // A full page walked to its end: attempts old enough may follow it.
  const more = rows.length === limit && plan.walked === rows.length;
  return { checked: rows.length, ttlTimers: plan.timers.length, failed: plan.failed.length + plan.partlySent.length, more, restartedAfter };
}

/**
 * `sweepWaitingAttempts` page after page until the cursor reaches attempts younger than the bound,
 * or for `budgetMs`: a page per sweep (2,000 every 30 s, 67 a second) would fall further behind
 * every day a deployment sends more than that, and walking from the start again after Redis lost
 * the cursor would take weeks.
 */
export async function sweepWaitingPages(
  db: Db, redis: Redis, queues: Queues, timers: Pick<TtlTimers, 'setEachKeep'>,
  opts: { boundMs: number; cursorKey: string; budgetMs: number; limit?: number; restartMarginMs?: number; shouldStop?: () => boolean },
): Promise<{ checked: number; ttlTimers: number; failed: number; pages: number; restartedAfter: number | null }> {
  const until = Date.now() + opts.budgetMs;
  const total = { checked: 0, ttlTimers: 0, failed: 0, pages: 0, restartedAfter: null as number | null };
  for (;;) {
    const page = await sweepWaitingAttempts(db, redis, queues, timers, opts);
    total.restartedAfter ??= page.restartedAfter;
    total.checked += page.checked;
    total.ttlTimers += page.ttlTimers;
    total.failed += page.failed;
    total.pages++;
    if (!page.more || Date.now() >= until || opts.shouldStop?.()) return total;
  }
}

/** The newest attempt's id, 0 when there is none. */
async function newestAttemptId(db: Db): Promise<number> {
  const { rows: [last] } = await db.query<{ id: number }>('SELECT COALESCE(max(id), 0) AS id FROM attempts');
  return Number(last!.id);
}

/** `firstIdSince`'s probe over the attempts: the first attempt at or above an id ($1), with when it was created. */
function attemptProbe(db: Db): (atLeast: number) => Promise<{ id: number; createdMs: number } | null> {
  return async (atLeast) => (await db.query<{ id: number; createdMs: number }>(
    `SELECT id, (extract(epoch FROM created_at) * 1000)::float8 AS "createdMs" FROM attempts WHERE id >= $1 ORDER BY id LIMIT 1`,
    [atLeast],
  )).rows[0] ?? null;
}

/**
 * A waiting walk without a cursor starts just before the first attempt made since `sinceMs`, and
 * records that (unless another walker recorded a cursor meanwhile, which then wins).
 */
async function restartCursor(db: Db, redis: Redis, cursorKey: string, sinceMs: number): Promise<number> {
  const after = (await firstIdSince(attemptProbe(db), await newestAttemptId(db), sinceMs)) - 1;
  if (await redis.set(cursorKey, String(after), 'NX') === 'OK') return after;
  return Number(await redis.get(cursorKey) ?? after);
}

/**
 * The smallest id `x` in 1..upTo+1 from which the first attempt (`probe(x)`: the first attempt with
 * an id at or above `x`, or null past the last) was created at or after `sinceMs`: a binary search
 * over the primary key, ~log2(upTo) probes, where a scan for the first young row would read every
 * older one. Ids rise with creation (a statement's rows take consecutive ids; two transactions
 * may interleave by their seconds, which the caller's margin covers). upTo+1 when none is young.
 */
export async function firstIdSince(
  probe: (atLeast: number) => Promise<{ id: number; createdMs: number } | null>, upTo: number, sinceMs: number,
): Promise<number> {
  let lo = 1;
  let hi = upTo + 1;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = await probe(mid);
    if (row === null || row.createdMs >= sinceMs) hi = mid;
    else lo = row.id + 1; // every id from mid to row.id leads to this old row
  }
  return lo;
}

/**
 * Sets again the ttl timers Redis lost. The timers' set keeps a mark in its slot (TtlTimers); when
 * the mark is gone, Redis lost its data, and with it the timers of every step still waiting on
 * Viber or WhatsApp, which would otherwise end only when the waiting walk reaches them
 * (RECEIPT_WAIT_HOURS later, or never on a cluster whose node with the cursor kept it). The first
 * sweep to see it records a walk over the attempts created since `sinceMs` (the caller's window:
 * every attempt whose timer may have been pending) up to the newest attempt (newer ones set their
 * own timers at hand-over), and marks the set kept, in one script; the walk then sets each waiting
 * attempt's timer as the hand-over did (keeping one that exists), page after page for up to
 * `budgetMs` or until `shouldStop` says so, its progress in Redis beside the mark, and goes on in
 * the next sweeps until it reaches its end. Redis losing its data again meanwhile starts a new walk,
 * which a walker of the old one cannot move on (ADVANCE_REARM). With the mark there, another
 * server holding the set (a restart or a failover, `TtlTimers.serverChange`) may still have lost
 * its last writes: the walk then covers the attempts created since a sweep last saw the server
 * before, less SERVER_CHANGE_MARGIN_MS (`cause` says which). Returns null when nothing was lost.
 */
export async function rearmLostTimers(
  db: Db, timers: Pick<TtlTimers, 'lossState' | 'startRearm' | 'serverChange' | 'startServerRearm' | 'advanceRearm' | 'setEachKeep'>,
  opts: { sinceMs: number; budgetMs: number; limit?: number; now?: number; serverMarginMs?: number; shouldStop?: () => boolean },
): Promise<{ started: RearmRange | null; cause: 'lost' | 'server' | null; checked: number; ttlTimers: number; pages: number; done: boolean } | null> {
  const limit = opts.limit ?? 2000;
  const state = await timers.lossState();
  let range = state.rearm;
  let started: RearmRange | null = null;
  let cause: 'lost' | 'server' | null = null;
  if (!range) {
    // The set lost (its mark gone): the walk covers every timer that may have been pending. Else
    // a server that changed (a restart, a failover) may have lost its last writes: the walk covers
    // the attempts handed over since a sweep last saw the one before, and a margin.
    const change = state.lost ? null : await timers.serverChange(opts.now ?? Date.now());
    if (!state.lost && !change) return null;
    const sinceMs = change ? change.lastSeenMs - (opts.serverMarginMs ?? SERVER_CHANGE_MARGIN_MS) : opts.sinceMs;
    const upTo = await newestAttemptId(db);
    const fresh: RearmRange = { walk: randomUUID(), after: (await firstIdSince(attemptProbe(db), upTo, sinceMs)) - 1, upTo };
    // Another process's sweep may have started it first: it goes on in the next sweep.
    if (!(await (change ? timers.startServerRearm(change.run, fresh) : timers.startRearm(fresh)))) return null;
    range = fresh;
    started = { ...fresh };
    cause = change ? 'server' : 'lost';
  }
  const until = Date.now() + opts.budgetMs;
  const result = { started, cause, checked: 0, ttlTimers: 0, pages: 0, done: false };
  for (;;) {
    const rows = await attemptPage(db, range.after, range.upTo, limit);
    const plan = planAttemptPage(rows, { now: opts.now ?? Date.now(), boundMs: null });
    await timers.setEachKeep(plan.timers);
    result.checked += rows.length;
    result.ttlTimers += plan.timers.length;
    result.pages++;
    if (plan.last !== null) range.after = plan.last;
    const end = rows.length < limit;
    // A walk that is no longer the one under way (Redis lost it and a new one began) stops here.
    if (!(await timers.advanceRearm(range.walk, end ? null : range.after))) return result;
    result.done = end;
    if (end || Date.now() >= until || opts.shouldStop?.()) return result;
  }
}

/**
 * The walk after a loss covers attempts created since the longest a timer can wait (a step's
 * longest ttl, or RECEIPT_WAIT_HOURS if longer) and this margin before the walk starts: enough for
 * the outage before Redis came back and for attempts whose creation and hand-over were apart.
 */
const REARM_MARGIN_MS = 24 * 3_600_000;

/**
 * The walk after a server change covers attempts created this long before a sweep last saw the
 * server before it: a timer is set at hand-over, which may come later than the attempt's creation
 * (a hand-over retried through a carrier outage); one handed over later still gets its timer back
 * from the waiting walk, after RECEIPT_WAIT_HOURS.
 */
const SERVER_CHANGE_MARGIN_MS = 3_600_000;

/** How long `RecoverySweep.stop` waits for a sweep under way. */
const STOP_WAIT_MS = 2000;

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
  private running: Promise<void> | null = null;
  private stopped = false;
  private readonly abort = new AbortController();
  private holderReadsFailing = false;

  constructor(
    private readonly db: Db,
    private readonly redis: Redis,
    private readonly queues: Queues,
    private readonly timers: Pick<TtlTimers, 'lossState' | 'startRearm' | 'serverChange' | 'startServerRearm' | 'advanceRearm' | 'setEachKeep'>,
    private readonly opts: { intervalMs: number; graceMs: number; webhookRetries: number; receiptWaitMs: number; redisPrefix: string },
    private readonly logger: Logger,
  ) {}

  /** One sweep, what `start` runs every interval. Never throws: a failure is logged, and the next sweep tries again. */
  async runOnce(): Promise<void> {
    try {
      let holderReadError: Error | null = null;
      const result = await sweepOnce(this.db, this.queues, {
        ...this.opts, liveHolders: (ids) => liveHolders(this.redis, this.opts.redisPrefix, ids), signal: this.abort.signal,
        onHolderReadError: (err) => { holderReadError = err; },
      });
      this.noteHolderReads(holderReadError);
      if (result.dispatch + result.webhooks > 0) {
        this.logger.info(result, 'recovery sweep re-enqueued work');
      }
      // One process at a time walks the cursor (several status roles would walk the same pages
      // and set the cursor back and forth): the one that takes the lock, for the walk's budget
      // and a margin (a process that dies holding it delays the next walk by that much).
      const cursorKey = `${this.opts.redisPrefix}:sweep:waiting-attempts`;
      const lock = `${cursorKey}:lock`;
      const token = randomUUID();
      if (this.stopped || await this.redis.set(lock, token, 'PX', WAITING_SWEEP_BUDGET_MS + 10_000, 'NX') !== 'OK') return;
      try {
        const until = Date.now() + WAITING_SWEEP_BUDGET_MS;
        const shouldStop = () => this.stopped;
        const rearm = await rearmLostTimers(this.db, this.timers, {
          sinceMs: Date.now() - Math.max(this.opts.receiptWaitMs, MAX_TTL_MINUTES * 60_000) - REARM_MARGIN_MS,
          budgetMs: WAITING_SWEEP_BUDGET_MS, shouldStop,
        });
        if (rearm?.started && rearm.cause === 'lost') {
          this.logger.warn({ attempts: rearm.started }, 'the ttl timers\' mark is missing (a first start, or Redis lost its data): setting the timers of waiting attempts again from Postgres');
        } else if (rearm?.started) {
          this.logger.warn({ attempts: rearm.started }, 'another Redis server holds the ttl timers (a restart or a failover, which may have lost its last writes): setting the timers of recent waiting attempts again from Postgres');
        }
        if (rearm?.done) this.logger.info({ lastSweep: { attempts: rearm.checked, ttlTimers: rearm.ttlTimers } }, 'the ttl timers of waiting attempts are set again');
        if (this.stopped) return;
        const waiting = await sweepWaitingPages(this.db, this.redis, this.queues, this.timers, {
          boundMs: this.opts.receiptWaitMs, cursorKey, budgetMs: Math.max(0, until - Date.now()), shouldStop,
        });
        if (waiting.restartedAfter !== null) {
          this.logger.warn({ after: waiting.restartedAfter }, 'the walk of attempts waiting too long had no cursor (a first start, or Redis lost it): it starts after this attempt id, a week before its bound');
        }
        if (waiting.ttlTimers + waiting.failed > 0) {
          this.logger.info(waiting, 'recovery sweep settled attempts that waited too long');
        }
      } finally {
        await runScript(this.redis, RELEASE_LOCK, [lock], [token]).catch(() => undefined);
      }
    } catch (err) {
      // Work stays findable in Postgres: the next sweep tries again (a stopping process's shutdown
      // may have closed its connections under it: not worth a line).
      if (!this.stopped) {
        this.logger.warn({ err: (err as Error).message, code: (err as { code?: string }).code }, 'recovery sweep could not re-enqueue work; trying again next sweep');
      }
    }
  }

  /** Once per outage: the webhook batch holders' keys could not be read, then again could. */
  private noteHolderReads(err: Error | null): void {
    if (err && !this.holderReadsFailing) {
      this.logger.warn({ err: err.message }, 'webhook batch holders could not be read; a killed relay\'s batches wait for the one-minute rule');
    } else if (!err && this.holderReadsFailing) {
      this.logger.info('webhook batch holders readable again');
    }
    this.holderReadsFailing = err !== null;
  }

  start(): void {
    const tick = async () => {
      await this.runOnce();
      if (this.stopped) return;
      this.timer = setTimeout(() => void (this.running = tick()), this.opts.intervalMs);
      this.timer.unref();
    };
    // The first sweep at once: a start after Redis lost its data (or a first start, with few
    // attempts yet) sets lost timers again without waiting an interval.
    this.timer = setTimeout(() => void (this.running = tick()), 0);
    this.timer.unref();
  }

  /**
   * Stops sweeping: a sweep under way ends after its page, and this waits for it up to
   * STOP_WAIT_MS (during a Redis outage its command waits for Redis, which the process's shutdown
   * then closes; nothing of a sweep needs finishing: the next one starts over).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    if (this.timer) clearTimeout(this.timer);
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([this.running, new Promise<void>((resolve) => { waited = setTimeout(resolve, STOP_WAIT_MS); })]);
    clearTimeout(waited);
  }
}
