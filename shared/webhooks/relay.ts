/**
 * The outbox relay: moves events from Postgres into webhook batches and the `webhooks` queue.
 * Events are grouped per (API key, callback URL) in id order, at most `batchMax` per batch; a
 * group shorter than that waits until its oldest event is `lingerMs` old (D4: at most 1 s), so
 * events that happen together travel together. Several relays may run: rows are claimed with
 * SKIP LOCKED. A batch whose job was lost (crash between commit and enqueue) is re-enqueued by
 * the recovery sweep.
 */
import { randomUUID } from 'node:crypto';
import { withTx, type Db } from '../db/pool.js';
import type { Queues } from '../queues.js';
import { webhookJobId, type WebhookJob } from '../queues.js';
import type { JobsOptions } from 'bullmq';
import { pushTo } from '../collections.js';

/** Attempts are one more than the retry schedule's length; delays come from the pool's backoff strategy. */
export function webhookJobOptions(retries: number): JobsOptions {
  return { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 }, attempts: retries + 1, backoff: { type: 'custom' } };
}

interface EventRef {
  id: number;
  account_id: number;
  key_id: number | null;
  callback_url: string;
  created_at: Date;
}

export interface RelayOptions {
  batchMax: number;
  lingerMs: number;
  /** Retries before a batch is dead-lettered (the length of the retry schedule). */
  retries: number;
  /** Rows claimed per pass. */
  pageSize?: number;
}

/** One pass; returns the number of batches created. */
export async function relayOnce(db: Db, queues: Queues, opts: RelayOptions, now = Date.now()): Promise<number> {
  const pageSize = opts.pageSize ?? 5000;
  const created = await withTx(db, async (tx) => {
    const { rows } = await tx.query<EventRef>(
      `SELECT id, account_id, key_id, callback_url, created_at FROM events
        WHERE batch_id IS NULL AND callback_url IS NOT NULL
        ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [pageSize],
    );
    const groups = new Map<string, EventRef[]>();
    for (const row of rows) {
      pushTo(groups, `${row.key_id ?? 'none'} ${row.callback_url}`, row);
    }
    const batches: Array<{ accountId: number; keyId: number | null; url: string; ids: number[] }> = [];
    const pageFull = rows.length === pageSize;
    for (const list of groups.values()) {
      for (let i = 0; i < list.length; i += opts.batchMax) {
        const chunk = list.slice(i, i + opts.batchMax);
        const full = chunk.length === opts.batchMax;
        const ripe = now - chunk[0]!.created_at.getTime() >= opts.lingerMs;
        if (!full && !ripe && !pageFull) {
          break; // wait for company; the rest of this group is younger still
        }
        batches.push({ accountId: chunk[0]!.account_id, keyId: chunk[0]!.key_id, url: chunk[0]!.callback_url, ids: chunk.map((e) => e.id) });
      }
    }
    if (batches.length === 0) {
      return [];
    }
    const { rows: inserted } = await tx.query<{ id: number; url: string }>(
      `INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids)
       SELECT u.webhook_id, u.account_id, u.key_id, u.url, u.ids::bigint[]
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY
           AS u(webhook_id, account_id, key_id, url, ids, n)
        ORDER BY n
       RETURNING id, url`,
      [batches.map(() => `msg_${randomUUID().replace(/-/g, '')}`), batches.map((b) => b.accountId), batches.map((b) => b.keyId),
        batches.map((b) => b.url), batches.map((b) => `{${b.ids.join(',')}}`)],
    );
    await tx.query(
      `UPDATE events e SET batch_id = b.id
         FROM (SELECT id, unnest(event_ids) AS event_id FROM webhook_batches WHERE id = ANY($1)) b
        WHERE e.id = b.event_id AND e.id = ANY($2)`,
      [inserted.map((r) => r.id), batches.flatMap((b) => b.ids)],
    );
    return inserted;
  }, { indexOnly: true });
  await enqueueBatches(queues, created, opts.retries);
  return created.length;
}

export async function enqueueBatches(queues: Queues, batches: Array<{ id: number; url: string }>, retries: number): Promise<void> {
  if (batches.length === 0) {
    return;
  }
  const options = webhookJobOptions(retries);
  await queues.webhooks.addBulk(batches.map((b) => ({
    name: 'deliver',
    data: { batchId: b.id, origin: originOf(b.url) } satisfies WebhookJob,
    opts: { ...options, jobId: webhookJobId(b.id) },
  })));
}

export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid';
  }
}

/** Runs the relay in a loop until stopped; immediately again after a busy pass. */
export class OutboxRelay {
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  constructor(
    private readonly db: Db,
    private readonly queues: Queues,
    private readonly opts: RelayOptions & { intervalMs: number },
    private readonly onError: (err: Error) => void,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let made = 0;
      try {
        made = await relayOnce(this.db, this.queues, this.opts);
      } catch (err) {
        this.onError(err as Error);
      }
      if (made === 0 && !this.stopped) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.opts.intervalMs);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }
}
