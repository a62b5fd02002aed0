/**
 * Where events' webhooks went (issue 27), read from what the relay already stores: the outbox
 * (events not yet in a batch) and `webhook_batches` (each batch's event ids and status). Nothing
 * is written per event to find its batch: a batch's ids ascend, and one GiST entry per batch
 * indexes the span from its first id to its last (migration 024), so each event's batch is an
 * index probe, confirmed against the batch's ids, however many batches the service writes. An
 * event not batched yet is found in the outbox the same way (migration 025), however long its
 * backlog.
 */
import type { Queryable } from '../db/pool.js';
import { stripCredentials } from '../webhooks/deliver.js';

export interface EventRef {
  id: number;
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
  /** In neither a batch nor the outbox, where the relay never leaves an event: shown rather than failing the lookup. */
  | { status: 'unknown'; url: string };

/**
 * The span of a row's event ids (a batch's, `b`, or an outbox row's, `o`): the expression
 * migrations 024 and 025 index, word for word (the planner uses an index only for the same
 * expression). The event retention (webhooks/retention.ts) probes the same indexes.
 */
export const eventIdSpan = (t: 'b' | 'o'): string =>
  `int8range(least(${t}.event_ids[1], ${t}.event_ids[cardinality(${t}.event_ids)]), greatest(${t}.event_ids[1], ${t}.event_ids[cardinality(${t}.event_ids)]), '[]')`;

/**
 * Each event's batch, or its outbox row (a row with a null batch id). `$1`: the event ids. One
 * statement, so one snapshot: a relay pass that moves an event from the outbox into a batch is
 * seen wholly or not at all.
 */
export const WHERE_EVENTS_WENT_SQL = `SELECT e.id AS event_id, b.id, b.status, b.url, b.attempts, b.last_status, b.delivered_at, b.dead_at
       FROM unnest($1::bigint[]) AS e(id)
       JOIN webhook_batches b ON ${eventIdSpan('b')} @> e.id AND e.id = ANY(b.event_ids)
     UNION ALL
     SELECT e.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL
       FROM unnest($1::bigint[]) AS e(id)
       JOIN outbox o ON ${eventIdSpan('o')} @> e.id AND e.id = ANY(o.event_ids)`;

interface WhereRow {
  event_id: number;
  /** The batch's id; null: the event is in the outbox. */
  id: number | null;
  status: 'pending' | 'delivered' | 'dead' | null;
  url: string | null;
  attempts: number | null;
  last_status: number | null;
  delivered_at: Date | null;
  dead_at: Date | null;
}

/** The webhook of each event, by event id. */
export async function webhookStatuses(db: Queryable, events: readonly EventRef[]): Promise<Map<number, WebhookStatus>> {
  const out = new Map<number, WebhookStatus>();
  const sent = new Map<number, EventRef>();
  for (const e of events) {
    if (e.callbackUrl === null) {
      out.set(e.id, { status: 'none' });
    } else {
      sent.set(e.id, e);
    }
  }
  if (sent.size === 0) {
    return out;
  }
  const { rows } = await db.query<WhereRow>(WHERE_EVENTS_WENT_SQL, [[...sent.keys()]]);
  for (const row of rows) {
    const event = sent.get(row.event_id);
    if (!event) continue;
    out.set(event.id, row.id === null
      ? { status: 'queued', url: stripCredentials(event.callbackUrl!) }
      : {
        status: row.status!, url: stripCredentials(row.url!), batch_id: row.id, attempts: row.attempts ?? 0,
        last_status: row.last_status, delivered_at: row.delivered_at?.toISOString() ?? null, dead_at: row.dead_at?.toISOString() ?? null,
      });
  }
  for (const e of sent.values()) {
    if (!out.has(e.id)) out.set(e.id, { status: 'unknown', url: stripCredentials(e.callbackUrl!) });
  }
  return out;
}
