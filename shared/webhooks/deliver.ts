/**
 * Delivering one stored webhook batch: a JSON array of its events, in event order, signed when
 * the key has a webhook secret (Standard Webhooks, signed at each attempt with the batch's stable
 * `webhook-id`). The outcome is recorded on the batch; retries are the queue's business.
 */
import type { Db } from '../db/pool.js';
import type { WebhookClient, WebhookPostResult } from './http.js';
import { signWebhook, isValidWebhookSecret } from './sign.js';
import { checkCallbackUrl } from '../net/ssrf.js';

export type DeliveryResult =
  | { kind: 'delivered' }
  | { kind: 'gone' } // not pending any more (delivered before, or dead and not replayed)
  | { kind: 'failed'; retryAfterMs?: number; reason: string };

interface BatchRow {
  id: number;
  webhook_id: string;
  url: string;
  status: string;
  event_ids: number[];
  webhook_secret: string | null;
}

export async function deliverBatch(db: Db, client: WebhookClient, batchId: number, allowPrivate: boolean): Promise<DeliveryResult> {
  const { rows } = await db.query<BatchRow>(
    `SELECT b.id, b.webhook_id, b.url, b.status, b.event_ids, k.webhook_secret
       FROM webhook_batches b LEFT JOIN api_keys k ON k.id = b.key_id WHERE b.id = $1`,
    [batchId],
  );
  const batch = rows[0];
  if (!batch || batch.status !== 'pending') {
    return { kind: 'gone' };
  }
  const { rows: events } = await db.query<{ body: string }>('SELECT body FROM events WHERE id = ANY($1) ORDER BY id', [batch.event_ids]);
  const body = `[${events.map((e) => e.body).join(',')}]`;

  let result: WebhookPostResult;
  const policy = checkCallbackUrl(batch.url, allowPrivate);
  if (!policy.ok) {
    result = { ok: false, status: null, error: `callback refused: ${policy.reason}` };
  } else {
    const headers: Record<string, string> = {};
    if (batch.webhook_secret && isValidWebhookSecret(batch.webhook_secret)) {
      Object.assign(headers, signWebhook(batch.webhook_secret, batch.webhook_id, Math.floor(Date.now() / 1000), body));
    }
    result = await client.post(batch.url, body, headers);
  }
  await db.query(
    `UPDATE webhook_batches SET attempts = attempts + 1, last_status = $2, last_error = $3, updated_at = now(),
            status = CASE WHEN $4 THEN 'delivered' ELSE status END, delivered_at = CASE WHEN $4 THEN now() END
      WHERE id = $1`,
    [batchId, result.status, result.ok ? null : (result.error ?? `HTTP ${result.status}`), result.ok],
  );
  if (result.ok) {
    return { kind: 'delivered' };
  }
  return {
    kind: 'failed',
    reason: result.error ?? `HTTP ${result.status}`,
    ...(result.retryAfterMs !== undefined && { retryAfterMs: result.retryAfterMs }),
  };
}

export async function markDead(db: Db, batchId: number): Promise<void> {
  await db.query(`UPDATE webhook_batches SET status = 'dead', dead_at = now(), updated_at = now() WHERE id = $1 AND status = 'pending'`, [batchId]);
}

export interface DeadBatch {
  id: number;
  webhook_id: string;
  account_id: number;
  key_id: number | null;
  url: string;
  events: number;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  dead_at: string;
}

/** Dead-lettered batches, newest first; URLs are shown without credentials. */
export async function listDeadBatches(db: Db, filter: { keyId?: number; since?: Date }): Promise<DeadBatch[]> {
  const { rows } = await db.query<Omit<DeadBatch, 'events' | 'created_at' | 'dead_at'> & { events: number; created_at: Date; dead_at: Date }>(
    `SELECT id, webhook_id, account_id, key_id, url, cardinality(event_ids) AS events, attempts, last_status, last_error, created_at, dead_at
       FROM webhook_batches
      WHERE status = 'dead' AND ($1::bigint IS NULL OR key_id = $1) AND ($2::timestamptz IS NULL OR dead_at >= $2)
      ORDER BY dead_at DESC LIMIT 1000`,
    [filter.keyId ?? null, filter.since ?? null],
  );
  return rows.map((r) => ({ ...r, url: stripCredentials(r.url), created_at: r.created_at.toISOString(), dead_at: r.dead_at.toISOString() }));
}

/** Put dead batches back to pending; returns their ids (the caller enqueues them). */
export async function reviveDeadBatches(db: Db, filter: { id?: number; keyId?: number; since?: Date }): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>(
    `UPDATE webhook_batches SET status = 'pending', attempts = 0, dead_at = NULL, updated_at = now()
      WHERE status = 'dead' AND ($1::bigint IS NULL OR id = $1) AND ($2::bigint IS NULL OR key_id = $2)
        AND ($3::timestamptz IS NULL OR dead_at >= $3)
      RETURNING id`,
    [filter.id ?? null, filter.keyId ?? null, filter.since ?? null],
  );
  return rows.map((r) => r.id);
}

function stripCredentials(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.username || url.password) {
      url.username = '';
      url.password = '';
    }
    return url.toString();
  } catch {
    return raw;
  }
}
