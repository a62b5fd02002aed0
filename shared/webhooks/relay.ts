/**
 * The outbox relay: moves events from Postgres into webhook batches and the `webhooks` queue.
 * Events are grouped per (API key, callback URL) in id order, at most `batchMax` per batch; a
 * group shorter than that waits until its oldest event is `lingerMs` old (D4: at most 1 s), so
 * events that happen together travel together. Several relays may run: rows are claimed with
 * SKIP LOCKED. A batch whose job was lost (crash between commit and enqueue) is re-enqueued by
 * the recovery sweep. Given a `DirectDelivery`, the relay makes each new batch's first attempt
 * itself (the events' bodies are read in the same pass); batches it has no slot for are queued.
 */
import { randomUUID } from 'node:crypto';
import { prepared, withTx, type Db } from '../db/pool.js';
import type { Queues } from '../queues.js';
import { enqueueBatches } from './jobs.js';
import { ascending, byId, consecutiveRuns } from '../collections.js';
import { arrayRows } from '../db/arrays.js';
import type { DirectDelivery, ReadyBatch } from './direct.js';
import { WEBHOOK_SECRET, openRowSecret } from '../secrets/row-secrets.js';

export interface EventRef {
  id: number;
  account_id: number;
  key_id: number | null;
  callback_url: string;
  /** ms since the epoch (a float8 costs less to parse than a timestamp). */
  created_ms: number;
  /** Read only when the relay delivers the batches itself. */
  body?: string;
}

export interface RelayOptions {
  batchMax: number;
  lingerMs: number;
  /** Retries before a batch is dead-lettered (the length of the retry schedule). */
  retries: number;
  /** Events per pass above which every group is sent at once, lingering or not. */
  pageSize?: number;
}

/** Outbox rows (statements' worth of events) claimed per pass. */
const OUTBOX_ROWS_PER_PASS = 200;

export interface RelayPass {
  /** Batches created. */
  batches: number;
  /**
   * Every outbox row at or below this id that was visible to the pass is handled now (null: the
   * pass read nothing). Rows of transactions still open then may yet appear below it.
   */
  doneThrough: number | null;
  /** When the pass read the outbox (its mark is as old as that read, not as the pass's start). */
  readAt: number;
}

/**
 * A pass's events by key and callback URL, in id order within each group. Rows of one statement
 * mostly share both, so a row like the one before joins that one's list without a key string
 * being built and hashed for it (docs/benchmarks.md).
 */
export function groupByReceiver(rows: EventRef[]): Map<string, EventRef[]> {
  const groups = new Map<string, EventRef[]>();
  let last: EventRef | null = null;
  let lastList: EventRef[] = [];
  for (const row of rows) {
    if (last !== null && row.key_id === last.key_id && row.callback_url === last.callback_url) {
      lastList.push(row);
    } else {
      const key = `${row.key_id ?? 'none'} ${row.callback_url}`;
      let list = groups.get(key);
      if (!list) {
        list = [];
        groups.set(key, list);
      }
      list.push(row);
      lastList = list;
    }
    last = row;
  }
  return groups;
}

/**
 * One pass over the outbox from `afterId` on (exclusive). The outbox's primary key is read in id
 * order; starting past the ids an earlier pass already handled keeps the pass from walking the
 * index entries of rows it deleted, which stay until vacuum.
 */
export async function relayOnce(
  db: Db, queues: Queues, opts: RelayOptions, now = Date.now(), afterId = 0, direct: DirectDelivery | null = null,
): Promise<RelayPass> {
  const pageSize = opts.pageSize ?? 5000;
  const { created, doneThrough, readAt } = await withTx(db, async (tx) => {
    // Each outbox row holds the event ids of one statement (one to a few thousand).
    const { rows: claimed } = await tx.query<{ id: number; event_ids: number[] }>(prepared(
      `SELECT id, event_ids FROM outbox WHERE id > $2 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [OUTBOX_ROWS_PER_PASS, afterId]),
    );
    const readAt = Date.now();
    if (claimed.length === 0) {
      return { created: [], doneThrough: null, readAt };
    }
    // The claimed rows' ids as runs of consecutive ids, each read as one range of the primary key:
    // one statement's events are consecutive, so a pass of ~1,500 ids makes ~10-20 runs instead of
    // ~1,500 descents of the index (docs/benchmarks.md).
    const ids: number[] = [];
    for (const c of claimed) {
      for (const id of c.event_ids) ids.push(Number(id)); // bigint[] elements arrive as text
    }
    const { lo, hi } = consecutiveRuns(ids.sort(ascending));
    // Ordered here, not by an ORDER BY: the ranges ascend and each is read in index order, so the
    // rows come in id order and the sort only confirms it, where Postgres copied every row with
    // its body into a sort of its own (docs/benchmarks.md, "Batches without a function in FROM").
    const { rows } = await tx.query<EventRef>(prepared(
      `SELECT e.id, e.account_id, e.key_id, e.callback_url, (extract(epoch FROM e.created_at) * 1000)::float8 AS created_ms${direct ? ', e.body' : ''}
         FROM ${arrayRows({ lo: '$1::bigint[]', hi: '$2::bigint[]' })} AS r JOIN events e ON e.id BETWEEN r.lo AND r.hi`,
      [lo, hi]),
    );
    rows.sort(byId);
    const groups = groupByReceiver(rows);
    const batches: Array<{ accountId: number; keyId: number | null; url: string; events: EventRef[] }> = [];
    const leftover: number[] = [];
    const pageFull = rows.length >= pageSize;
    for (const list of groups.values()) {
      for (let i = 0; i < list.length; i += opts.batchMax) {
        const chunk = list.slice(i, i + opts.batchMax);
        const full = chunk.length === opts.batchMax;
        const ripe = now - chunk[0]!.created_ms >= opts.lingerMs;
        if (!full && !ripe && !pageFull) {
          // Wait for company; the rest of this group is younger still.
          for (const e of list.slice(i)) leftover.push(e.id);
          break;
        }
        batches.push({ accountId: chunk[0]!.account_id, keyId: chunk[0]!.key_id, url: chunk[0]!.callback_url, events: chunk });
      }
    }
    // The claimed rows go; events still lingering come back in one new row (above every claimed
    // one), their ids ascending like every outbox row's (migration 025: the lookup's span index).
    await tx.query(prepared(
      `WITH gone AS (DELETE FROM outbox WHERE id = ANY($1))
       INSERT INTO outbox (event_ids) SELECT $2::bigint[] WHERE cardinality($2::bigint[]) > 0`,
      [claimed.map((c) => c.id), leftover.sort(ascending)]),
    );
    const doneThrough = claimed[claimed.length - 1]!.id;
    if (batches.length === 0) {
      return { created: [], doneThrough, readAt };
    }
    // Each batch's ids ascend (the rows were sorted above): the message lookup finds an event's
    // batch by the span from its first id to its last (migration 024, lookup/webhooks.ts).
    const webhookIds = batches.map(() => `msg_${randomUUID().replace(/-/g, '')}`);
    const { rows: inserted } = await tx.query<{ id: number; url: string; webhook_id: string }>(prepared(
      // $1..$5: each batch's webhook id, account, key, URL and event ids (as array literals);
      // $6: the process that makes their first attempts itself (holders.ts), or null.
      `INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids, holder)
       SELECT u.webhook_id, u.account_id, u.key_id, u.url, u.ids::bigint[], $6::text
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY
           AS u(webhook_id, account_id, key_id, url, ids, n)
        ORDER BY n
       RETURNING id, url, webhook_id`,
      [webhookIds, batches.map((b) => b.accountId), batches.map((b) => b.keyId),
        batches.map((b) => b.url), batches.map((b) => `{${b.events.map((e) => e.id).join(',')}}`), direct?.holder ?? null]),
    );
    const idOf = new Map(inserted.map((row) => [row.webhook_id, Number(row.id)]));
    const created = batches.map((b, i) => ({ ...b, id: idOf.get(webhookIds[i]!)!, webhookId: webhookIds[i]! }));
    return { created, doneThrough, readAt };
  }, { indexOnly: true });
  const queued = direct ? await deliverDirectly(db, direct, created) : created;
  await enqueueBatches(queues, queued, opts.retries);
  return { batches: created.length, doneThrough, readAt };
}

/** Offers the new batches to the direct delivery; returns those it had no slot for. */
async function deliverDirectly(
  db: Db, direct: DirectDelivery, created: Array<{ id: number; url: string; keyId: number | null; webhookId: string; events: EventRef[] }>,
): Promise<Array<{ id: number; url: string }>> {
  if (created.length === 0) {
    return created;
  }
  const keyIds = [...new Set(created.map((b) => b.keyId).filter((k): k is number => k !== null))];
  const { rows: keys } = await db.query<{ id: number; webhook_secret: string | null; webhook_secret_sealed: Buffer | null }>(
    'SELECT id, webhook_secret, webhook_secret_sealed FROM api_keys WHERE id = ANY($1)', [keyIds]);
  const secretOf = new Map(keys.map((k) => [Number(k.id), openRowSecret(direct.box, WEBHOOK_SECRET, Number(k.id), k.webhook_secret_sealed, k.webhook_secret)]));
  const queued: Array<{ id: number; url: string }> = [];
  for (const b of created) {
    const ready: ReadyBatch = {
      id: b.id, webhookId: b.webhookId, url: b.url, keyId: b.keyId, secret: b.keyId === null ? null : (secretOf.get(b.keyId) ?? null),
      body: `[${b.events.map((e) => e.body).join(',')}]`,
    };
    if (!direct.offer(ready)) {
      queued.push(b);
    }
  }
  return queued;
}

/**
 * Where a relay's passes start. A pass may start past the ids an earlier pass handled only once
 * every transaction that could still add an outbox row below them has ended: ids are taken when a
 * transaction writes, not when it commits. Event-writing transactions are short, so the floor is
 * the mark of a pass at least `lagMs` old, and every `fullPassMs` one pass starts from the
 * beginning, which relays anything a transaction held open longer than that.
 */
export class RelayFloor {
  private marks: Array<{ at: number; id: number }> = [];
  private floor = 0;
  private lastFull: number;

  constructor(private readonly lagMs = 2_000, private readonly fullPassMs = 15_000, now = Date.now()) {
    this.lastFull = now;
  }

  /** The id the next pass starts after. */
  next(now = Date.now()): number {
    if (now - this.lastFull >= this.fullPassMs) {
      this.lastFull = now;
      return 0;
    }
    while (this.marks.length > 0 && this.marks[0]!.at <= now - this.lagMs) {
      this.floor = Math.max(this.floor, this.marks.shift()!.id);
    }
    return this.floor;
  }

  /** Record what a pass that read the outbox at `at` finished. */
  record(at: number, doneThrough: number | null): void {
    if (doneThrough !== null) {
      this.marks.push({ at, id: doneThrough });
    }
  }
}

/** Runs the relay in a loop until stopped; immediately again after a busy pass. */
export class OutboxRelay {
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private readonly floor: RelayFloor;

  constructor(
    private readonly db: Db,
    private readonly queues: Queues,
    private readonly opts: RelayOptions & { intervalMs: number; rescanMs: number },
    private readonly onError: (err: Error) => void,
    private readonly direct: DirectDelivery | null = null,
  ) {
    this.floor = new RelayFloor(Math.min(2_000, opts.rescanMs / 2), opts.rescanMs);
  }

  start(): void {
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let made = 0;
      try {
        const now = Date.now();
        const pass = await relayOnce(this.db, this.queues, this.opts, now, this.floor.next(now), this.direct);
        this.floor.record(pass.readAt, pass.doneThrough);
        made = pass.batches;
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

  /** Stops after the current pass; waits for its direct deliveries and their recording. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    await this.direct?.drain();
  }
}
