/**
 * Message retention (MESSAGE_RETENTION_DAYS; 0, the default, keeps everything as before): the sweep
 * deletes the records of sent messages once they are older than the retention and their work is
 * over, and inbound messages older than the retention. Phone numbers and texts are personal data;
 * at thousands of recipients a second these tables also grow without bound.
 *
 * A message goes, in one statement with every row of it (its recipients, their attempts, the
 * attempts' carrier refs and sandbox copies, the recipients' events), once it was accepted longer
 * ago than the retention and its work is over, which is exactly:
 * - its dispatch is not pending (`dispatch_pending` clear) and its `send_at`, if any, has passed;
 * - no recipient waits for a step (`due_at` set: scheduled, deferred, a fallback step), and every
 *   recipient still `queued` has its attempt at its current step (else a step is yet to start);
 * - no attempt is `sending` (its carrier has not answered: a dispatch job, a submit response or
 *   the sweep's waiting walk settles it), none of a channel whose step succeeds at `delivered`
 *   (Viber, WhatsApp) is still `sent` (its ttl timer ends it), and none changed within
 *   RECEIPT_WAIT_HOURS: the bound the service gives a carrier's reports (the sweep's waiting walk,
 *   parked receipts), so an SMS `sent` awaiting its receipt, a `delivered` that may be `seen`, an
 *   attempt ended by its ttl that a late receipt may still report, or a late `sent` after a
 *   failure, all keep their message until then. A report that comes later finds no carrier ref
 *   and is parked and then expired like any receipt for an id never registered;
 * - no sandbox copy of its attempts is still `pending` (scripted reports yet to come).
 * Its events go with it, except those a delivery still needs (in the outbox, or in a `pending` or
 * `dead` batch: the event retention's rule, `NO_DELIVERY_NEEDS`); those stay, without their
 * message, until the event retention takes them (it runs at MESSAGE_RETENTION_DAYS when
 * EVENT_RETENTION_DAYS is not set, shared/config.ts).
 *
 * The walk goes over `recipients` in primary-key order (ids ascend with `created_at`, and a
 * message's `created_at` is its recipients'), up to the first one written within the retention
 * (shared/db/walk.ts): each aged recipient leads to its message, and the message to all its rows
 * by the indexes the send path and the lookup use anyway (messages by id; recipients by
 * `(account_id, created_at)`; attempts by `(recipient_id, step)`; refs by `carrier_refs_attempt`;
 * sandbox copies by their unique attempt id; events by `events_recipient`): no index of its own.
 * A message still at work is kept and looked at again by the next full walk (at most once per
 * `recheckMs`). `inbound_messages` and the verification API's sessions (`validations`, expired
 * minutes after their start) are walked the same way and go at their age. WhatsApp's
 * customer-service windows (`whatsapp_windows`, one row per business number and person, when the
 * person last wrote) whose last message is older than the retention go too, walked by their key
 * on each full walk: a window more than 24 hours old is closed, as no row is.
 *
 * Each statement reads a bounded number of rows and deletes whole messages; two statements (two
 * sweep processes) that meet delete a message once, the second finding its rows gone. What is
 * not deleted: idempotency keys (they expire after 24 hours, less than the shortest retention),
 * parked receipts (RECEIPT_WAIT_HOURS, ParkedReceiptExpiry), suppressions (an opt-out outlives the
 * messages it came from), and webhook batches (the event retention's). A verification session's
 * `recipient_id` names its code SMS, which is as old as it, and is read only while the session's
 * code copy exists (a day after it expired at most).
 */
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { PeriodicPass } from '../db/periodic-cleanup.js';
import { retentionSeconds, Walk, WALK_CUTOFF, walkSql, type WalkRow } from '../db/walk.js';
import { NO_DELIVERY_NEEDS } from '../webhooks/retention.js';
import { CHANNEL_MODULES, CHANNELS } from '../channels/index.js';

/** The channels whose step succeeds at `sent` (SMS): a `sent` attempt of another channel waits for its ttl. */
const SUCCEED_AT_SENT = CHANNELS.filter((c) => CHANNEL_MODULES[c].succeedsAt === 'sent').map((c) => `'${c}'`).join(', ');

/** Rows one statement of the messages' walk deleted, per table. */
interface MessagesRow extends WalkRow {
  messages: number;
  recipients: number;
  attempts: number;
  carrier_refs: number;
  sandbox_messages: number;
  events: number;
}

/**
 * One statement of the messages' walk. `$1`: the recipient id after which it reads; `$2`: the most
 * recipients it reads; `$3`: the retention in seconds; `$4`: RECEIPT_WAIT_HOURS in seconds. It
 * reads the next `$2` recipients, keeps those before the first one written within the retention
 * (`aged`), and deletes each of their messages whose work is over (`busy` lists those whose work
 * is not), with all its rows. It answers `WalkRow` (the recipients read, the rows deleted, the
 * first recipient within the retention, the last aged one, the first aged one whose message it
 * kept) and the rows deleted per table.
 *
 * Every join into a large table is a LATERAL or `= ANY(ARRAY(…))` lookup by an index, so the plan
 * stays one of index scans however the CTEs' sizes are estimated (the sweep's pool plans generic
 * plans without sequential scans). The tables are deleted from in one order, the engine's
 * (attempts before recipients), each by its key in ascending order (the order of the deleted
 * counts below is the order the deletes run in): two of these statements, or one and a status
 * batch, wait for each other rather than deadlock. Events are deleted by id, as the event
 * retention deletes them, for the same reason.
 */
const MESSAGES_SQL = `WITH w AS (SELECT id, message_id, created_at FROM recipients WHERE id > $1 ORDER BY id LIMIT $2),
     edge AS (SELECT min(id) AS id FROM w WHERE created_at >= ${WALK_CUTOFF}),
     aged AS (SELECT id, message_id FROM w WHERE id < coalesce((SELECT id FROM edge), 9223372036854775807)),
     m AS (SELECT m.id, m.account_id, m.created_at FROM messages m
            WHERE m.id = ANY(ARRAY(SELECT DISTINCT message_id FROM aged)) AND m.created_at < ${WALK_CUTOFF}
              AND NOT m.dispatch_pending AND (m.send_at IS NULL OR m.send_at <= now())),
     rs AS (SELECT r.id, r.message_id, r.state, r.step, r.due_at
              FROM m CROSS JOIN LATERAL (
                SELECT r.id, r.message_id, r.state, r.step, r.due_at FROM recipients r
                 WHERE r.account_id = m.account_id AND r.created_at = m.created_at AND r.message_id = m.id) r),
     at AS (SELECT a.id, a.recipient_id, rs.message_id, a.step, a.channel, a.state, a.updated_at
              FROM rs CROSS JOIN LATERAL (
                SELECT a.id, a.recipient_id, a.step, a.channel, a.state, a.updated_at FROM attempts a WHERE a.recipient_id = rs.id) a),
     busy AS (SELECT rs.message_id FROM rs
               WHERE rs.due_at IS NOT NULL
                  OR (rs.state = 'queued' AND NOT EXISTS (SELECT 1 FROM at WHERE at.recipient_id = rs.id AND at.step = rs.step))
              UNION
              SELECT at.message_id FROM at
               WHERE at.state = 'sending' OR (at.state = 'sent' AND at.channel NOT IN (${SUCCEED_AT_SENT}))
                  OR at.updated_at >= now() - make_interval(secs => $4::float8)
                  OR EXISTS (SELECT 1 FROM sandbox_messages s WHERE s.attempt_id = at.id AND s.pending)),
     doomed AS (SELECT id FROM m WHERE id NOT IN (SELECT message_id FROM busy)),
     doomed_r AS (SELECT id FROM rs WHERE message_id NOT IN (SELECT message_id FROM busy)),
     doomed_a AS (SELECT id FROM at WHERE message_id NOT IN (SELECT message_id FROM busy)),
     gone_a AS (DELETE FROM attempts t WHERE t.id = ANY(ARRAY(SELECT id FROM doomed_a)) RETURNING 1),
     gone_c AS (DELETE FROM carrier_refs t WHERE t.attempt_id = ANY(ARRAY(SELECT id FROM doomed_a)) RETURNING 1),
     gone_s AS (DELETE FROM sandbox_messages t WHERE t.attempt_id = ANY(ARRAY(SELECT id FROM doomed_a)) RETURNING 1),
     ev AS (SELECT e.id FROM doomed_r CROSS JOIN LATERAL (SELECT e.id FROM events e WHERE e.recipient_id = doomed_r.id) e),
     gone_e AS (DELETE FROM events t WHERE t.id = ANY(ARRAY(SELECT id FROM ev)) AND ${NO_DELIVERY_NEEDS('t')} RETURNING 1),
     gone_r AS (DELETE FROM recipients t WHERE t.id = ANY(ARRAY(SELECT id FROM doomed_r)) RETURNING 1),
     gone_m AS (DELETE FROM messages t WHERE t.id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1),
     c AS (SELECT (SELECT count(*) FROM gone_a)::int AS attempts, (SELECT count(*) FROM gone_c)::int AS carrier_refs,
                  (SELECT count(*) FROM gone_s)::int AS sandbox_messages, (SELECT count(*) FROM gone_e)::int AS events,
                  (SELECT count(*) FROM gone_r)::int AS recipients, (SELECT count(*) FROM gone_m)::int AS messages)
     SELECT (SELECT count(*) FROM w)::int AS seen,
            c.attempts + c.carrier_refs + c.sandbox_messages + c.events + c.recipients + c.messages AS deleted,
            (SELECT id FROM edge) AS edge, (SELECT max(id) FROM aged) AS last,
            (SELECT min(id) FROM aged WHERE message_id NOT IN (SELECT id FROM doomed)) AS first_kept,
            c.messages, c.recipients, c.attempts, c.carrier_refs, c.sandbox_messages, c.events
       FROM c`;

/** Inbound messages older than the retention, all of them. `$1`, `$2`, `$3`: as `walkSql` says (the retention in seconds). */
const INBOUND_SQL = walkSql('inbound_messages', 'true');

/**
 * Verification sessions (the verification API's `validations`: a number, a code's hash, the proof's
 * MAC) started longer ago than the retention, all of them: a session expires minutes after its
 * start (D8), so an aged one is long over, and its code SMS is a message of the same age. `$1`,
 * `$2`, `$3`: as `walkSql` says. A later verify or proof check of its token answers 404, as for an
 * unknown token.
 */
const VALIDATIONS_SQL = walkSql('validations', 'true');

/**
 * One statement of the windows' walk, in key order. `$1`, `$2`: the key after which it reads
 * (phone number id, person; '' and '' from the start); `$3`: the most rows it reads; `$4`: the
 * retention in seconds. It deletes those of them whose person last wrote longer ago than the
 * retention (checked again on the row as it is when deleted: a message noted meanwhile keeps it),
 * and answers how many it read and deleted, and the last key it read.
 */
const WINDOWS_SQL = `WITH w AS (SELECT phone_number_id, user_number FROM whatsapp_windows
                WHERE (phone_number_id, user_number) > ($1::text, $2::text) ORDER BY phone_number_id, user_number LIMIT $3),
     gone AS (DELETE FROM whatsapp_windows t USING w
               WHERE t.phone_number_id = w.phone_number_id AND t.user_number = w.user_number
                 AND t.last_inbound_at < now() - make_interval(secs => $4::float8) RETURNING 1),
     tail AS (SELECT phone_number_id, user_number FROM w ORDER BY phone_number_id DESC, user_number DESC LIMIT 1)
     SELECT (SELECT count(*) FROM w)::int AS seen, (SELECT count(*) FROM gone)::int AS deleted,
            (SELECT phone_number_id FROM tail) AS last_phone_number_id, (SELECT user_number FROM tail) AS last_user_number`;

/** What a pass deleted, per table (logged with it). */
type Deleted = Record<
  'messages' | 'recipients' | 'attempts' | 'carrier_refs' | 'sandbox_messages' | 'events' | 'inbound_messages' | 'validations' | 'whatsapp_windows', number
>;

const nothingDeleted = (): Deleted => ({
  messages: 0, recipients: 0, attempts: 0, carrier_refs: 0, sandbox_messages: 0, events: 0, inbound_messages: 0, validations: 0, whatsapp_windows: 0,
});

export class MessageRetention extends PeriodicPass {
  private readonly seconds: number;
  private readonly receiptWaitSeconds: number;
  private readonly messages = new Walk<MessagesRow>(MESSAGES_SQL);
  private readonly inbound = new Walk(INBOUND_SQL);
  private readonly validations = new Walk(VALIDATIONS_SQL);
  /** The windows' walk under way: the last key it read (null: none under way; one starts with each full walk). */
  private windowsAfter: [string, string] | null = null;
  private lastFullWalk = -Infinity;
  private deleted = nothingDeleted();

  /**
   * `retentionDays`: MESSAGE_RETENTION_DAYS (0: keep everything; a pass then deletes nothing);
   * `receiptWaitHours`: RECEIPT_WAIT_HOURS. `batch`: recipients (inbound messages, windows) one
   * statement reads.
   */
  constructor(
    private readonly db: Db, logger: Logger, retentionDays: number, receiptWaitHours: number, intervalMs = 60_000,
    private readonly batch = 500, private readonly recheckMs = 3_600_000,
  ) {
    super(logger, 'messages, inbound messages and verification sessions older than MESSAGE_RETENTION_DAYS were deleted', intervalMs, 'info');
    this.seconds = retentionSeconds(retentionDays);
    this.receiptWaitSeconds = Math.round(receiptWaitHours * 3_600);
  }

  /** One pass: messages with their rows, then inbound messages, verification sessions, then (with a full walk) windows; returns the rows deleted. */
  async once(): Promise<number> {
    this.deleted = nothingDeleted();
    if (this.seconds === 0) return 0;
    const full = Date.now() - this.lastFullWalk >= this.recheckMs;
    if (full) this.lastFullWalk = Date.now();
    const stopping = () => this.stopping;
    const d = this.deleted;
    let total = await this.messages.pass(this.db, this.batch, [this.seconds, this.receiptWaitSeconds], full, stopping, (r) => {
      d.messages += r.messages;
      d.recipients += r.recipients;
      d.attempts += r.attempts;
      d.carrier_refs += r.carrier_refs;
      d.sandbox_messages += r.sandbox_messages;
      d.events += r.events;
    });
    if (this.stopping) return total;
    d.inbound_messages = await this.inbound.pass(this.db, this.batch, [this.seconds], full, stopping);
    total += d.inbound_messages;
    if (this.stopping) return total;
    d.validations = await this.validations.pass(this.db, this.batch, [this.seconds], full, stopping);
    total += d.validations;
    if (this.stopping) return total;
    if (full && this.windowsAfter === null) this.windowsAfter = ['', ''];
    if (this.windowsAfter !== null) {
      d.whatsapp_windows = await this.windowsPass(stopping);
      total += d.whatsapp_windows;
    }
    return total;
  }

  protected override detail(): Record<string, number> {
    return this.deleted;
  }

  /** The windows' walk from where it stopped to the end of the table, or until `stopping()`; returns the rows deleted. */
  private async windowsPass(stopping: () => boolean): Promise<number> {
    let deleted = 0;
    while (this.windowsAfter !== null) {
      const { rows } = await this.db.query<{ seen: number; deleted: number; last_phone_number_id: string | null; last_user_number: string | null }>(
        WINDOWS_SQL, [...this.windowsAfter, this.batch, this.seconds]);
      const r = rows[0]!;
      deleted += r.deleted;
      this.windowsAfter = r.seen < this.batch || r.last_phone_number_id === null ? null : [r.last_phone_number_id, r.last_user_number!];
      if (stopping()) break;
    }
    return deleted;
  }
}
