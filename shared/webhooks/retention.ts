/**
 * Event retention (EVENT_RETENTION_DAYS; 0, the default, keeps everything as before): the sweep
 * deletes events and webhook batches once they are older than the retention and nothing needs them
 * any more. D4 keeps events to be read later; this bounds how much later.
 *
 * - A webhook batch goes once it has been `delivered` for the retention (counted from
 *   `delivered_at`), or `dead` for the retention (counted from `dead_at`, so a dead letter can be
 *   replayed for the whole retention after it died). A `pending` batch is never deleted.
 * - An event goes once it was written longer ago than the retention and it is neither in the outbox
 *   nor in a `pending` or `dead` batch: a pending batch's events are read by id when it is POSTed
 *   (deliver.ts), and a dead one's when it is replayed. A dead letter and its events therefore age
 *   out together, counted from `dead_at`: a pass deletes batches first, then events, so a dead
 *   letter's events go in the pass that deletes it or at the latest with the next full walk (below).
 *   An event without a callback URL is never in either, so it goes at its age.
 *
 * Both tables are walked in primary-key order from the oldest row (ids ascend with `created_at`),
 * a few thousand rows a statement, up to the first row written within the retention: no index of
 * its own (the send path writes `events` per recipient), and no statement holds locks for long or
 * writes a large transaction. A row the walk keeps (a batch pending or not yet expired, an event
 * still owed a delivery) is looked at again by a full walk from the oldest kept row at most once per
 * `recheckMs`; the passes between walk only from where the last one stopped, so a backlog of kept
 * dead letters is not read every minute.
 */
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { PeriodicPass } from '../db/periodic-cleanup.js';
import { retentionSeconds, Walk, WALK_CUTOFF, walkSql } from '../db/walk.js';
import { eventIdSpan } from '../lookup/webhooks.js';

/**
 * Batches whose outcome is older than the retention. A replay racing the delete is safe either
 * way: the delete rechecks `status` on the row the replay made pending and skips it, and a replay
 * after the delete finds no dead batch. `$1`, `$2`, `$3`: as `walkSql` says (the retention in seconds).
 */
const BATCHES_SQL = walkSql('webhook_batches',
  `((t.status = 'delivered' AND coalesce(t.delivered_at, t.updated_at) < ${WALK_CUTOFF}) OR (t.status = 'dead' AND t.dead_at < ${WALK_CUTOFF}))`);

/**
 * Whether no delivery needs the event `t` any more: it has no callback URL, or it is neither in
 * the outbox nor in a `pending` or `dead` batch. Each is looked for in the outbox and in the
 * batches by the span indexes of migrations 024 and 025 (as the message lookup does). Within one
 * statement, one snapshot: the relay moves an event from the outbox into a batch in one
 * transaction, so the event is seen in one or the other; a replay turns a dead batch pending, and
 * both protect its events. The message retention (engine/message-retention.ts) keeps a deleted
 * message's events by the same rule.
 */
export const NO_DELIVERY_NEEDS = (t: string): string => `(${t}.callback_url IS NULL OR (
         NOT EXISTS (SELECT 1 FROM outbox o WHERE ${eventIdSpan('o')} @> ${t}.id AND ${t}.id = ANY(o.event_ids))
         AND NOT EXISTS (SELECT 1 FROM webhook_batches b WHERE ${eventIdSpan('b')} @> ${t}.id AND ${t}.id = ANY(b.event_ids) AND b.status IN ('pending', 'dead'))))`;

/** Aged events no delivery needs. `$1`, `$2`, `$3`: as `walkSql` says (the retention in seconds). */
const EVENTS_SQL = walkSql('events', NO_DELIVERY_NEEDS('t'));

export class EventRetention extends PeriodicPass {
  private readonly seconds: number;
  private readonly batches = new Walk(BATCHES_SQL);
  private readonly events = new Walk(EVENTS_SQL);
  private lastFullWalk = -Infinity;

  /** `retentionDays`: EVENT_RETENTION_DAYS, or MESSAGE_RETENTION_DAYS when that is unset (`eventRetentionDaysOf`; 0: keep everything, a pass then deletes nothing). */
  constructor(
    private readonly db: Db, logger: Logger, retentionDays: number, intervalMs = 60_000, private readonly batch = 5_000,
    private readonly recheckMs = 3_600_000,
  ) {
    super(logger, 'events and webhook batches older than EVENT_RETENTION_DAYS were deleted', intervalMs, 'debug');
    this.seconds = retentionSeconds(retentionDays);
  }

  /** One pass: batches first (a dead letter's events go in the same pass), then events; returns the rows deleted. */
  async once(): Promise<number> {
    if (this.seconds === 0) return 0;
    const full = Date.now() - this.lastFullWalk >= this.recheckMs;
    if (full) this.lastFullWalk = Date.now();
    const stopping = () => this.stopping;
    const batches = await this.batches.pass(this.db, this.batch, [this.seconds], full, stopping);
    return batches + (this.stopping ? 0 : await this.events.pass(this.db, this.batch, [this.seconds], full, stopping));
  }
}
