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
import { eventIdSpan } from '../lookup/webhooks.js';

/** The cutoff, from `$3`: the retention in seconds. */
const CUTOFF = 'now() - make_interval(secs => $3::float8)';

/**
 * One statement of a walk over `table` (`events` or `webhook_batches`) in id order. `$1`: the id
 * after which it reads; `$2`: the most rows it reads; `$3`: the retention in seconds. It reads the
 * next `$2` rows, keeps those before the first one written within the retention (`aged`), and
 * deletes those of them that `deletable` (about the row as `t`) allows. It answers how many rows it
 * read and deleted, the first row within the retention (`edge`, or null), the last aged row, and
 * the first aged row it kept.
 */
function walkSql(table: 'events' | 'webhook_batches', deletable: string): string {
  return `WITH w AS (SELECT id, created_at FROM ${table} WHERE id > $1 ORDER BY id LIMIT $2),
       edge AS (SELECT min(id) AS id FROM w WHERE created_at >= ${CUTOFF}),
       aged AS (SELECT id FROM w WHERE id < coalesce((SELECT id FROM edge), 9223372036854775807)),
       gone AS (DELETE FROM ${table} t WHERE t.id = ANY(ARRAY(SELECT id FROM aged)) AND ${deletable} RETURNING t.id)
     SELECT (SELECT count(*) FROM w)::int AS seen, (SELECT count(*) FROM gone)::int AS deleted, (SELECT id FROM edge) AS edge,
            (SELECT max(id) FROM aged) AS last, (SELECT min(id) FROM aged WHERE id NOT IN (SELECT id FROM gone)) AS first_kept`;
}

/**
 * Batches whose outcome is older than the retention. A replay racing the delete is safe either
 * way: the delete rechecks `status` on the row the replay made pending and skips it, and a replay
 * after the delete finds no dead batch.
 */
const BATCHES_SQL = walkSql('webhook_batches',
  `((t.status = 'delivered' AND coalesce(t.delivered_at, t.updated_at) < ${CUTOFF}) OR (t.status = 'dead' AND t.dead_at < ${CUTOFF}))`);

/**
 * Aged events no delivery needs. Each is looked for in the outbox and in the batches by the span
 * indexes of migrations 024 and 025 (as the message lookup does). One statement, one snapshot: the
 * relay moves an event from the outbox into a batch in one transaction, so the event is seen in one
 * or the other; a replay turns a dead batch pending, and both protect its events.
 */
const EVENTS_SQL = walkSql('events', `(t.callback_url IS NULL OR (
         NOT EXISTS (SELECT 1 FROM outbox o WHERE ${eventIdSpan('o')} @> t.id AND t.id = ANY(o.event_ids))
         AND NOT EXISTS (SELECT 1 FROM webhook_batches b WHERE ${eventIdSpan('b')} @> t.id AND t.id = ANY(b.event_ids) AND b.status IN ('pending', 'dead'))))`);

interface StatementRow {
  seen: number;
  deleted: number;
  edge: string | null;
  last: string | null;
  first_kept: string | null;
}

/** A walk over one table: where the last pass stopped, and below which nothing is left to delete. */
class Walk {
  /** Every row at or below this id is deleted (or was never there). */
  private low = 0;
  /** Where the last pass stopped: the next one reads on from here. */
  private frontier = 0;

  constructor(private readonly sql: string) {}

  /**
   * Deletes what it may from `full ? low : frontier` up to the first row within the retention, or
   * until `stopping()` says so between statements (every row up to `after` was looked at, so the
   * next pass goes on from there); returns how many.
   */
  async pass(db: Db, batch: number, seconds: number, full: boolean, stopping: () => boolean): Promise<number> {
    const start = full ? this.low : this.frontier;
    let after = start;
    let deleted = 0;
    let firstKept: number | null = null;
    for (;;) {
      const { rows } = await db.query<StatementRow>(this.sql, [after, batch, seconds]);
      const r = rows[0]!;
      deleted += r.deleted;
      if (firstKept === null && r.first_kept !== null) firstKept = Number(r.first_kept);
      if (r.last !== null) after = Number(r.last);
      if (r.edge !== null) {
        after = Number(r.edge) - 1;
        break;
      }
      if (r.seen < batch || stopping()) break;
    }
    this.frontier = after;
    if (start === this.low) this.low = firstKept === null ? after : firstKept - 1;
    return deleted;
  }
}

export class EventRetention extends PeriodicPass {
  private readonly seconds: number;
  private readonly batches = new Walk(BATCHES_SQL);
  private readonly events = new Walk(EVENTS_SQL);
  private lastFullWalk = -Infinity;

  /** `retentionDays`: EVENT_RETENTION_DAYS (0: keep everything; a pass then deletes nothing). */
  constructor(
    private readonly db: Db, logger: Logger, retentionDays: number, intervalMs = 60_000, private readonly batch = 5_000,
    private readonly recheckMs = 3_600_000,
  ) {
    super(logger, 'events and webhook batches older than EVENT_RETENTION_DAYS were deleted', intervalMs, 'debug');
    // At least a second: a retention too short to round to one would otherwise delete nothing.
    this.seconds = retentionDays > 0 ? Math.max(1, Math.round(retentionDays * 86_400)) : 0;
  }

  /** One pass: batches first (a dead letter's events go in the same pass), then events; returns the rows deleted. */
  async once(): Promise<number> {
    if (this.seconds === 0) return 0;
    const full = Date.now() - this.lastFullWalk >= this.recheckMs;
    if (full) this.lastFullWalk = Date.now();
    const stopping = () => this.stopping;
    const batches = await this.batches.pass(this.db, this.batch, this.seconds, full, stopping);
    return batches + (this.stopping ? 0 : await this.events.pass(this.db, this.batch, this.seconds, full, stopping));
  }
}
