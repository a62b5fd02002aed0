/**
 * Delivering one stored webhook batch: a JSON array of its events, in event order, signed when
 * the key has a webhook secret (Standard Webhooks, signed at each attempt with the batch's stable
 * `webhook-id`). Every attempt's outcome is recorded on the batch, which counts the attempts; a
 * batch's first attempt is usually made by the relay that created it (`direct.ts`), retries by the
 * webhook queue's jobs.
 */
import { prepared, type Db } from '../db/pool.js';
import type { WebhookClient, WebhookPostResult } from './http.js';
import { signWebhook, isValidWebhookSecret } from './sign.js';
import { checkCallbackUrl } from '../net/ssrf.js';
import { observeWebhookDelivery } from '../metrics.js';
import type { SecretBox } from '../secrets/sealed.js';
import { WEBHOOK_SECRET, openRowSecret } from '../secrets/row-secrets.js';

export type DeliveryResult =
  | { kind: 'delivered' }
  | { kind: 'gone' } // not pending any more (delivered before, or dead and not replayed)
  | { kind: 'dead' } // none of its events is stored any more: dead-lettered without a POST
  | { kind: 'failed'; retryAfterMs?: number; reason: string; attempts: number; status: number | null; url: string; keyId: number | null };

/** What a POST of one batch needs. */
export interface BatchToPost {
  webhookId: string;
  url: string;
  /** The key's webhook secret, or null: unsigned. */
  secret: string | null;
  /** The JSON array of the batch's events. */
  body: string;
  /** The API key the batch belongs to (for the failure log), when known. */
  keyId?: number | null;
}

interface BatchRow {
  id: number;
  key_id: number | null;
  webhook_id: string;
  url: string;
  status: string;
  event_ids: number[];
  webhook_secret: string | null;
  webhook_secret_sealed: Buffer | null;
}

/**
 * Delivers one stored batch (a queued job: a retry, or a batch the relay did not deliver itself),
 * signed with its key's webhook secret (opened with `box`).
 */
export async function deliverBatch(db: Db, box: SecretBox, client: WebhookClient, batchId: number, allowPrivate: boolean): Promise<DeliveryResult> {
  const { rows } = await db.query<BatchRow>(
    `SELECT b.id, b.key_id, b.webhook_id, b.url, b.status, b.event_ids, k.webhook_secret, k.webhook_secret_sealed
       FROM webhook_batches b LEFT JOIN api_keys k ON k.id = b.key_id WHERE b.id = $1`,
    [batchId],
  );
  const batch = rows[0];
  if (!batch || batch.status !== 'pending') {
    return { kind: 'gone' };
  }
  const { rows: events } = await db.query<{ body: string }>('SELECT body FROM events WHERE id = ANY($1) ORDER BY id', [batch.event_ids]);
  if (events.length === 0) {
    // The event retention never deletes the events of a pending or dead batch (retention.ts), but
    // events deleted by hand, or by a policy of the operator's own, would make this an empty array.
    // Another delivery of the batch (a duplicate job) may have settled it meanwhile: then it is gone.
    return await markDead(db, batchId, 'its events are no longer stored') ? { kind: 'dead' } : { kind: 'gone' };
  }
  const result = await postBatch(client, {
    webhookId: batch.webhook_id, url: batch.url,
    secret: batch.key_id === null ? null : openRowSecret(box, WEBHOOK_SECRET, Number(batch.key_id), batch.webhook_secret_sealed, batch.webhook_secret),
    body: `[${events.map((e) => e.body).join(',')}]`,
  }, allowPrivate);
  const attempts = await recordOutcomes(db, [{ batchId, result }]);
  if (result.ok) {
    return { kind: 'delivered' };
  }
  return {
    kind: 'failed',
    reason: failureReason(result),
    attempts: attempts.get(batchId) ?? 1,
    status: result.status,
    url: batch.url,
    keyId: batch.key_id === null ? null : Number(batch.key_id),
    ...(result.retryAfterMs !== undefined && { retryAfterMs: result.retryAfterMs }),
  };
}

/** Signs the body (Standard Webhooks, at each attempt) when the key has a valid secret, and POSTs it. */
export async function postBatch(client: WebhookClient, batch: BatchToPost, allowPrivate: boolean): Promise<WebhookPostResult> {
  const policy = checkCallbackUrl(batch.url, allowPrivate);
  if (!policy.ok) {
    observeWebhookDelivery('refused', 0);
    return { ok: false, status: null, error: `callback refused: ${policy.reason}` };
  }
  const headers: Record<string, string> = {};
  if (batch.secret && isValidWebhookSecret(batch.secret)) {
    Object.assign(headers, signWebhook(batch.secret, batch.webhookId, Math.floor(Date.now() / 1000), batch.body));
  }
  const started = performance.now();
  let result: WebhookPostResult;
  try {
    result = await client.post(batch.url, batch.body, headers);
  } catch (err) {
    result = { ok: false, status: null, error: (err as Error).message };
  }
  observeWebhookDelivery(result.ok ? 'delivered' : result.status === null ? 'network_error' : 'http_error', (performance.now() - started) / 1000);
  return result;
}

export function failureReason(result: WebhookPostResult): string {
  return result.error ?? `HTTP ${result.status}`;
}

/**
 * Records the outcome of one attempt per batch, all in one statement; returns each batch's
 * attempts so far (the retry schedule and the dead-letter decision count them, not the queue's
 * job, because a batch's first attempt may have been made without a job).
 */
export async function recordOutcomes(db: Db, outcomes: Array<{ batchId: number; result: WebhookPostResult }>): Promise<Map<number, number>> {
  const { rows } = await db.query<{ id: number; attempts: number }>(prepared(
    // holder: cleared, as a retry job stands for a batch whose attempt failed (holders.ts).
    `UPDATE webhook_batches b SET attempts = b.attempts + 1, last_status = u.status, last_error = u.error, updated_at = now(), holder = NULL,
            status = CASE WHEN u.ok THEN 'delivered' ELSE b.status END, delivered_at = CASE WHEN u.ok THEN now() END
       FROM unnest($1::bigint[], $2::int[], $3::text[], $4::boolean[]) AS u(id, status, error, ok)
      WHERE b.id = u.id
      RETURNING b.id, b.attempts`,
    [outcomes.map((o) => o.batchId), outcomes.map((o) => o.result.status), outcomes.map((o) => (o.result.ok ? null : failureReason(o.result))),
      outcomes.map((o) => o.result.ok)]),
  );
  return new Map(rows.map((r) => [Number(r.id), r.attempts]));
}

/** Dead-letters a pending batch; `reason`, when given, becomes its last error. False: it was not pending. */
export async function markDead(db: Db, batchId: number, reason?: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE webhook_batches SET status = 'dead', dead_at = now(), updated_at = now(), last_error = coalesce($2, last_error)
      WHERE id = $1 AND status = 'pending'`,
    [batchId, reason ?? null]);
  return (rowCount ?? 0) > 0;
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

/** Put dead batches back to pending; returns their ids (the caller enqueues them; without a queue, the recovery sweep does once they wait past its grace). */
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

export function stripCredentials(raw: string): string {
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
