/**
 * A retention's walk over one table in primary-key order (ids ascend with `created_at`), a bounded
 * statement at a time, up to the first row written within the retention: no index of its own, no
 * statement that holds locks for long or writes a large transaction. A row the walk keeps (what
 * something still needs) is looked at again by a full walk from the oldest kept row; the passes
 * between read on from where the last one stopped. Used by the event retention
 * (webhooks/retention.ts) and the message retention (engine/message-retention.ts).
 */
import type { Db } from './pool.js';

/**
 * A retention of `days` (fractions allowed) as the seconds a walk's statement takes: 0 (keep
 * everything) stays 0, anything else is at least a second, since a retention too short to round
 * to one would otherwise delete nothing.
 */
export function retentionSeconds(days: number): number {
  return days > 0 ? Math.max(1, Math.round(days * 86_400)) : 0;
}

/** The cutoff of a walk's statement, from `$3`: the retention in seconds. */
export const WALK_CUTOFF = 'now() - make_interval(secs => $3::float8)';

/**
 * One statement of a walk over `table` in id order. `$1`: the id after which it reads; `$2`: the
 * most rows it reads; `$3`: the retention in seconds. It reads the next `$2` rows, keeps those
 * before the first one written within the retention (`aged`), and deletes those of them that
 * `deletable` (about the row as `t`) allows. It answers how many rows it read and deleted, the
 * first row within the retention (`edge`, or null), the last aged row, and the first aged row it
 * kept.
 */
export function walkSql(table: 'events' | 'webhook_batches' | 'inbound_messages' | 'validations', deletable: string): string {
  return `WITH w AS (SELECT id, created_at FROM ${table} WHERE id > $1 ORDER BY id LIMIT $2),
       edge AS (SELECT min(id) AS id FROM w WHERE created_at >= ${WALK_CUTOFF}),
       aged AS (SELECT id FROM w WHERE id < coalesce((SELECT id FROM edge), 9223372036854775807)),
       gone AS (DELETE FROM ${table} t WHERE t.id = ANY(ARRAY(SELECT id FROM aged)) AND ${deletable} RETURNING t.id)
     SELECT (SELECT count(*) FROM w)::int AS seen, (SELECT count(*) FROM gone)::int AS deleted, (SELECT id FROM edge) AS edge,
            (SELECT max(id) FROM aged) AS last, (SELECT min(id) FROM aged WHERE id NOT IN (SELECT id FROM gone)) AS first_kept`;
}

/**
 * What every statement of a walk answers (`walkSql`'s columns; a statement of its own may answer
 * more, which `Walk.pass` hands to its `tally`): rows read, rows deleted, the first row within the
 * retention, the last aged row, the first aged row kept.
 */
export interface WalkRow {
  seen: number;
  deleted: number;
  edge: string | null;
  last: string | null;
  first_kept: string | null;
}

/** A walk over one table: where the last pass stopped, and below which nothing is left to delete. */
export class Walk<R extends WalkRow = WalkRow> {
  /** Every row at or below this id is deleted (or was never there). */
  private low = 0;
  /** Where the last pass stopped: the next one reads on from here. */
  private frontier = 0;

  /** `sql`: a statement taking `$1` (the id after which it reads), `$2` (the most rows it reads), then the pass's `params`. */
  constructor(private readonly sql: string) {}

  /**
   * Deletes what it may from `full ? low : frontier` up to the first row within the retention, or
   * until `stopping()` says so between statements (every row up to `after` was looked at, so the
   * next pass goes on from there); returns how many rows its statements deleted. `tally` sees each
   * statement's answer.
   */
  async pass(db: Db, batch: number, params: readonly unknown[], full: boolean, stopping: () => boolean, tally?: (row: R) => void): Promise<number> {
    const start = full ? this.low : this.frontier;
    let after = start;
    let deleted = 0;
    let firstKept: number | null = null;
    for (;;) {
      const { rows } = await db.query<R>(this.sql, [after, batch, ...params]);
      const r = rows[0]!;
      deleted += r.deleted;
      tally?.(r);
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
