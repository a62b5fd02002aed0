/**
 * Where events' webhooks went (issue 27), read from what the relay already stores: the outbox
 * (events not yet in a batch) and `webhook_batches` (each batch's event ids and status). Nothing
 * indexes batches by event, and nothing is written per event to make it so: a batch's id grows
 * with its creation time, so the batches that can hold an event are a range of the primary key,
 * found by a binary search on `created_at` over that key (a few dozen index probes), and read with
 * their `event_ids` compared to the events asked for.
 */
import type { Queryable } from '../db/pool.js';
import { stripCredentials } from '../webhooks/deliver.js';

export interface EventRef {
  id: number;
  createdAt: Date;
  callbackUrl: string | null;
}

export type WebhookStatus =
  /** The event has no callback URL (the message's, or its key's default): kept, never sent (D4). */
  | { status: 'none' }
  /** In the outbox: the relay has not put it into a batch yet. */
  | { status: 'queued'; url: string }
  /** In a batch: `pending` (being delivered or retried), `delivered`, or `dead` (dead-lettered, D4). */
  | {
    status: 'pending' | 'delivered' | 'dead'; url: string; batch_id: number; attempts: number; last_status: number | null;
    delivered_at: string | null; dead_at: string | null;
  }
  /** Not found where it should be (its batch lies outside the range searched). */
  | { status: 'unknown'; url: string };

/** Events written closer together than this share one range of batches. */
const CLUSTER_GAP_MS = 60_000;
/**
 * A batch's transaction may start a little before its event's commit; the relay batches an event
 * within a second or so, at the latest at its next full pass (WEBHOOK_RELAY_RESCAN_MS, 15 s). The
 * range read is about this long: at 100 batches a second, 3,500 batches (~10 ms).
 */
const BEFORE_MS = 5_000;
const AFTER_MS = 30_000;
/** Batches read past a range when an event was not found in it (a relay that fell behind). */
const FURTHER_BATCHES = 100_000;

interface BatchRow {
  kind: 'batch' | 'queued';
  id: number | null;
  status: 'pending' | 'delivered' | 'dead' | null;
  url: string | null;
  attempts: number | null;
  last_status: number | null;
  delivered_at: Date | null;
  dead_at: Date | null;
  event_ids: number[];
}

/** The webhook of each event, by event id. */
export async function webhookStatuses(db: Queryable, events: readonly EventRef[]): Promise<Map<number, WebhookStatus>> {
  const out = new Map<number, WebhookStatus>();
  const sent = events.filter((e) => {
    if (e.callbackUrl === null) out.set(e.id, { status: 'none' });
    return e.callbackUrl !== null;
  }).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  if (sent.length === 0) {
    return out;
  }
  // Ranges of creation time, one per cluster of events.
  const windows: Array<{ from: Date; to: Date }> = [];
  for (const e of sent) {
    const last = windows[windows.length - 1];
    const t = e.createdAt.getTime();
    if (last && t + AFTER_MS - last.to.getTime() <= CLUSTER_GAP_MS) {
      last.to = new Date(Math.max(last.to.getTime(), t + AFTER_MS));
    } else {
      windows.push({ from: new Date(t - BEFORE_MS), to: new Date(t + AFTER_MS) });
    }
  }
  const bounds = await firstBatchesAfter(db, windows.flatMap((w) => [w.from, w.to]));
  const ranges = windows.map((w) => ({ lo: bounds.get(w.from.getTime())!, hi: bounds.get(w.to.getTime())! }));
  const ids = sent.map((e) => e.id);
  const { rows } = await db.query<BatchRow>(
    `SELECT 'batch' AS kind, b.id, b.status, b.url, b.attempts, b.last_status, b.delivered_at, b.dead_at, b.event_ids
       FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi)
       JOIN webhook_batches b ON b.id >= r.lo AND b.id < r.hi
      WHERE b.event_ids && $3::bigint[]
     UNION ALL
     SELECT 'queued', NULL, NULL, NULL, NULL, NULL, NULL, NULL, o.event_ids FROM outbox o WHERE o.event_ids && $3::bigint[]`,
    [ranges.map((r) => r.lo), ranges.map((r) => r.hi), ids],
  );
  record(out, sent, rows);
  const missing = sent.filter((e) => !out.has(e.id));
  if (missing.length > 0) {
    // A relay that fell behind batched these later than the ranges reach: read on, a bounded number of batches.
    const from = ranges[ranges.length - 1]!.hi;
    const { rows: later } = await db.query<BatchRow>(
      `SELECT 'batch' AS kind, id, status, url, attempts, last_status, delivered_at, dead_at, event_ids
         FROM webhook_batches WHERE id >= $1 AND id < $1 + $2 AND event_ids && $3::bigint[] ORDER BY id LIMIT $4`,
      [from, FURTHER_BATCHES, missing.map((e) => e.id), missing.length],
    );
    record(out, missing, later);
  }
  for (const e of sent) {
    if (!out.has(e.id)) out.set(e.id, { status: 'unknown', url: stripCredentials(e.callbackUrl!) });
  }
  return out;
}

function record(out: Map<number, WebhookStatus>, events: readonly EventRef[], rows: readonly BatchRow[]): void {
  const wanted = new Map(events.map((e) => [e.id, e]));
  for (const row of rows) {
    for (const raw of row.event_ids) {
      const event = wanted.get(Number(raw)); // bigint[] elements arrive as text
      if (!event) continue;
      out.set(event.id, row.kind === 'queued' || row.id === null
        ? { status: 'queued', url: stripCredentials(event.callbackUrl!) }
        : {
          status: row.status!, url: stripCredentials(row.url!), batch_id: row.id, attempts: row.attempts ?? 0,
          last_status: row.last_status, delivered_at: row.delivered_at?.toISOString() ?? null, dead_at: row.dead_at?.toISOString() ?? null,
        });
    }
  }
}

/**
 * For each instant, the id from which batches were created at or after it (a binary search over
 * the primary key comparing `created_at`; batch ids grow with their creation time). One statement
 * for every instant; each step is one index probe.
 */
async function firstBatchesAfter(db: Queryable, instants: readonly Date[]): Promise<Map<number, number>> {
  const { rows } = await db.query<{ t: Date; hi: number }>(
    `WITH RECURSIVE s(lo, hi, t) AS (
       SELECT 0::bigint, COALESCE((SELECT max(id) FROM webhook_batches), 0) + 1, t FROM unnest($1::timestamptz[]) AS t
       UNION ALL
       SELECT CASE WHEN p.before THEN p.mid ELSE s.lo END, CASE WHEN p.before THEN s.hi ELSE p.mid END, s.t
         FROM s CROSS JOIN LATERAL (
           SELECT (s.lo + s.hi) / 2 AS mid,
                  COALESCE((SELECT b.created_at < s.t FROM webhook_batches b WHERE b.id >= (s.lo + s.hi) / 2 ORDER BY b.id LIMIT 1), false) AS before
         ) p
        WHERE s.hi - s.lo > 1)
     SELECT t, min(hi) AS hi FROM s GROUP BY t`,
    [instants],
  );
  return new Map(rows.map((r) => [r.t.getTime(), r.hi]));
}
