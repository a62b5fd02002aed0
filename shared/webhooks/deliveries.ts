/**
 * What customers see of their webhook deliveries (REST API): recent batches with their status,
 * attempts, last error and next attempt, and replaying their own dead letters. A key sees the
 * batches of its own events; the primary key also those of its sub-keys (as with messages, D6).
 */
import Joi from 'joi';
import type { Redis } from '../redis.js';
import type { Db } from '../db/pool.js';
import type { Queues } from '../queues.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { webhookJobId } from '../queues.js';
import { isoInstant, validate } from '../validation.js';
import { badRequest } from '../errors.js';
import { enqueueReplayed } from './jobs.js';
import type { Logger } from '../logger.js';
import { stripCredentials } from './deliver.js';
import { byId } from '../collections.js';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'dead'] as const;

export const deliveriesQuerySchema = Joi.object<{ status?: (typeof DELIVERY_STATUSES)[number]; limit: number; cursor?: number }>({
  status: Joi.string().valid(...DELIVERY_STATUSES).description('only batches in this status'),
  limit: Joi.number().integer().min(1).max(200).default(50).description('batches per page'),
  cursor: Joi.number().integer().min(1).description('`next_cursor` of the previous page'),
});

export const replayBodySchema = Joi.object<{ id?: number; since?: Date }>({
  id: Joi.number().integer().min(1).description('one dead-lettered batch'),
  since: isoInstant.description('every batch of yours dead-lettered since then'),
}).xor('id', 'since').messages({ 'object.missing': 'give id or since', 'object.xor': 'give id or since, not both' });

export interface DeliveryView {
  id: number;
  webhook_id: string;
  /** The callback URL without credentials. */
  url: string;
  status: (typeof DELIVERY_STATUSES)[number];
  events: number;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  delivered_at: string | null;
  dead_at: string | null;
  /** When the next attempt is due (pending batches waiting out a retry delay), else null. */
  next_attempt_at: string | null;
}

interface Row {
  id: string;
  webhook_id: string;
  url: string;
  status: DeliveryView['status'];
  events: number;
  attempts: number;
  last_status: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  delivered_at: Date | null;
  dead_at: Date | null;
}

/** A primary key sees its account's batches; a sub-key its own. */
function scope(key: ApiKeyRecord): [number, number | null] {
  return [key.accountId, key.isPrimary ? null : key.id];
}

/** Due time of a batch's retry job (BullMQ keeps delayed jobs scored by due time × 0x1000), or null. */
async function nextAttempts(redis: Redis, queues: Queues, ids: number[]): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  if (ids.length === 0) return out;
  const delayed = queues.webhooks.keys.delayed!;
  // One key (the webhooks queue's, in its own hash tag's slot on a Redis Cluster): one pipeline.
  const pipeline = redis.pipeline();
  for (const id of ids) pipeline.zscore(delayed, webhookJobId(id));
  const scores = ((await pipeline.exec()) ?? []).map(([, score]) => score as string | null);
  ids.forEach((id, i) => {
    const score = scores[i];
    if (score !== null && score !== undefined) out.set(id, new Date(Math.floor(Number(score) / 0x1000)).toISOString());
  });
  return out;
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

/** `GET /v1/webhooks/deliveries`: newest first, `next_cursor` for the page after (null at the end). */
export async function listDeliveries(db: Db, redis: Redis, queues: Queues, key: ApiKeyRecord, query: unknown): Promise<{ deliveries: DeliveryView[]; next_cursor: number | null }> {
  const q = validate(deliveriesQuerySchema, query, { convert: true });
  const [accountId, keyId] = scope(key);
  const { rows } = await db.query<Row>(
    `SELECT id, webhook_id, url, status, cardinality(event_ids) AS events, attempts, last_status, last_error,
            created_at, updated_at, delivered_at, dead_at
       FROM webhook_batches
      WHERE account_id = $1 AND ($2::bigint IS NULL OR key_id = $2) AND ($3::text IS NULL OR status = $3)
        AND ($4::bigint IS NULL OR id < $4)
      ORDER BY id DESC LIMIT $5`,
    [accountId, keyId, q.status ?? null, q.cursor ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  const next = await nextAttempts(redis, queues, page.filter((r) => r.status === 'pending').map((r) => Number(r.id)));
  return {
    deliveries: page.map((r) => ({
      id: Number(r.id), webhook_id: r.webhook_id, url: stripCredentials(r.url), status: r.status, events: r.events, attempts: r.attempts,
      last_status: r.last_status, last_error: r.last_error, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString(),
      delivered_at: iso(r.delivered_at), dead_at: iso(r.dead_at), next_attempt_at: next.get(Number(r.id)) ?? null,
    })),
    next_cursor: rows.length > q.limit ? Number(page[page.length - 1]!.id) : null,
  };
}

/** At most this many dead letters go back to delivery per call. */
export const MAX_REPLAY = 1000;

/** `POST /v1/webhooks/replay`: the key's own dead letters (one by id, or all since a time) are delivered again. */
export async function replayDeliveries(
  db: Db, queues: Queues, key: ApiKeyRecord, body: unknown, retries: number, logger: Logger,
): Promise<{ replayed: number; ids: number[] }> {
  const input = validate(replayBodySchema, body, { convert: true });
  const [accountId, keyId] = scope(key);
  const { rows } = await db.query<{ id: string; url: string }>(
    `UPDATE webhook_batches SET status = 'pending', attempts = 0, dead_at = NULL, updated_at = now()
      WHERE id IN (SELECT id FROM webhook_batches
                    WHERE status = 'dead' AND account_id = $1 AND ($2::bigint IS NULL OR key_id = $2)
                      AND ($3::bigint IS NULL OR id = $3) AND ($4::timestamptz IS NULL OR dead_at >= $4)
                    ORDER BY id LIMIT $5)
        AND status = 'dead'
      RETURNING id, url`,
    [accountId, keyId, input.id ?? null, input.since ?? null, MAX_REPLAY],
  );
  if (input.id !== undefined && rows.length === 0) {
    throw badRequest(`id: batch ${input.id} is not one of your dead-lettered batches`, 'VALIDATION', { field: 'id' });
  }
  // An UPDATE returns its rows in the order its plan met them, not the subquery's: sorted here, so
  // `ids` ascend whatever the plan (the API documents them so).
  const batches = rows.map((r) => ({ id: Number(r.id), url: r.url })).sort(byId);
  await enqueueReplayed(queues, batches, retries, logger);
  return { replayed: batches.length, ids: batches.map((b) => b.id) };
}
