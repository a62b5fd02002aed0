/**
 * `GET /v1/messages` (spec "Sent-message record", D6): one row per recipient of one UTC day,
 * newest last, with keyset pagination; or, with `message_id`, the recipients of one message (or
 * the one recipient a per-recipient id names), found as `GET /v2/messages/{id}` finds them.
 *
 * Every page is one range scan of an index of `recipients`: `(account_id, created_at, id)` for a
 * primary key (it sees its sub-keys' messages too) or `(key_id, created_at, id)` for a sub-key
 * (only its own). The scan starts right after the cursor's `(created_at, id)` and stops at the end
 * of the day or after `limit + 1` rows; nothing counts the whole day. `tag` and `phone_number`
 * filter rows within that scan; with `phone_number` the scan is of `(account_id, phone, created_at,
 * id)` instead (002_rest.sql), so a number lookup reads only that number's rows.
 *
 * The cursor is opaque to clients: base64url of `<created_at with microseconds>|<recipient row id>`
 * of the last row of the page. Postgres keeps microseconds, so the cursor carries them exactly
 * (a JavaScript Date would round them to milliseconds and repeat or skip rows).
 */
import type { Queryable } from '../db/pool.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { badRequest } from '../errors.js';
import { normalizePhone } from '../phone/normalize.js';
import { checkQueryText, limitParam, refuseUnknownParams, singleParam as single } from './input.js';
import { parseIdRef } from '../sending/ids.js';
import { resolveMessageId } from '../lookup/timeline.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
const MAX_TAG_LENGTH = 100;
const MAX_PHONE_LENGTH = 64;

export const MESSAGE_QUERY_PARAMS = ['date', 'message_id', 'tag', 'phone_number', 'cursor', 'limit'] as const;

export interface MessageQuery {
  /** First instant of the UTC day (inclusive) and of the next day (exclusive); optional with `messageId`. */
  from?: Date;
  to?: Date;
  /** A message id (its recipients) or a recipient's id (that one), as `GET /v2/messages/{id}` takes them. */
  messageId?: string;
  tag?: string;
  /** Stored form of the number (E.164 digits) and the text as given (numbers that could not be normalised keep it). */
  phone?: { e164: string | null; raw: string };
  cursor?: { at: string; id: number };
  limit: number;
}

export interface SentMessageRecord {
  message_id: string;
  message_parts: number;
  ts_sent: number;
  ts_delivered: number;
  sent: number;
  delivered: number;
  nondelivered: number;
  body: string;
  sender: string;
  to: string;
  flow: string;
}

export interface MessagePage {
  messages: SentMessageRecord[];
  next_cursor: string | null;
}

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})$/;
const CURSOR_AT_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** The UTC day `YYYY-MM-DD` as [start, next day start). */
export function parseDay(value: string | undefined): { from: Date; to: Date } {
  if (value === undefined || value === '') {
    throw badRequest('date: is required (YYYY-MM-DD, a UTC day)');
  }
  const m = DATE_RE.exec(value);
  const from = m ? new Date(`${value}T00:00:00.000Z`) : null;
  if (!m || !from || Number.isNaN(from.getTime()) || from.toISOString().slice(0, 10) !== value || Number(m[1]) < 1970) {
    throw badRequest('date: must be a calendar date YYYY-MM-DD (UTC), from 1970 on');
  }
  return { from, to: new Date(from.getTime() + 86_400_000) };
}

export function encodeCursor(at: string, id: number): string {
  return Buffer.from(`${at}|${id}`, 'utf8').toString('base64url');
}

export function decodeCursor(value: string): { at: string; id: number } {
  const invalid = () => badRequest('cursor: is not a cursor returned by this API (use next_cursor as given)');
  if (value.length > 100 || !/^[A-Za-z0-9_-]+$/.test(value)) {
    throw invalid();
  }
  const [at, idText, ...rest] = Buffer.from(value, 'base64url').toString('utf8').split('|');
  if (rest.length > 0 || at === undefined || idText === undefined || !CURSOR_AT_RE.test(at) || !/^\d{1,15}$/.test(idText)) {
    throw invalid();
  }
  // A well-shaped but impossible instant (month 13) would make Postgres fail: check it round-trips.
  const ms = new Date(at.slice(0, 23) + 'Z');
  if (Number.isNaN(ms.getTime()) || ms.toISOString() !== at.slice(0, 23) + 'Z' || Number(at.slice(0, 4)) < 1970) {
    throw invalid();
  }
  return { at, id: Number(idText) };
}

/** Check the query string of `GET /v1/messages`; unknown parameters are named in the 400. */
export function parseMessageQuery(query: Record<string, unknown>, accountCountry: string): MessageQuery {
  refuseUnknownParams(query, MESSAGE_QUERY_PARAMS);
  const messageId = single(query, 'message_id');
  if (messageId !== undefined && parseIdRef(messageId) === null) {
    throw badRequest('message_id: must be a message id (20 hexadecimal characters) or a recipient id (<message_id>-<index>, or its own id)');
  }
  const date = single(query, 'date');
  // With message_id the day is the message's own; a date given too must be that day.
  const day = messageId !== undefined && date === undefined ? {} : parseDay(date);
  const out: MessageQuery = { ...day, limit: DEFAULT_LIMIT, ...(messageId !== undefined && { messageId }) };

  const limit = single(query, 'limit');
  if (limit !== undefined) {
    out.limit = limitParam(limit, MAX_LIMIT);
  }
  const tag = single(query, 'tag');
  if (tag !== undefined) {
    out.tag = checkQueryText('tag', tag, MAX_TAG_LENGTH);
  }
  const phone = single(query, 'phone_number');
  if (phone !== undefined) {
    const raw = checkQueryText('phone_number', phone, MAX_PHONE_LENGTH);
    // The same number shape as when sending (D2): `+420 777 123 456`, `777123456` and `420777123456` match alike.
    out.phone = { e164: normalizePhone(raw, accountCountry), raw };
  }
  const cursor = single(query, 'cursor');
  if (cursor !== undefined && cursor !== '') {
    out.cursor = decodeCursor(cursor);
  }
  return out;
}

interface Row {
  id: number;
  cursor_at: string;
  message_id: string;
  message_parts: number;
  ts_sent: number;
  ts_delivered: number;
  sent: boolean;
  delivered: boolean;
  nondelivered: boolean;
  body: string;
  sender: string;
  to: string;
  flow: string;
}

/** One page of the key's recipients of the day (the primary key sees the whole account). */
export async function listMessages(db: Queryable, key: Pick<ApiKeyRecord, 'id' | 'accountId' | 'isPrimary'>, q: MessageQuery): Promise<MessagePage> {
  // A sub-key also names its account: harmless for the key index, and it lets a phone lookup use
  // recipients_account_phone_day (002_rest.sql), whose first column is the account.
  const params: unknown[] = [key.accountId];
  const where = ['r.account_id = $1'];
  if (q.messageId !== undefined) {
    // The message's recipients are the rows of its account written at its created_at (timeline.ts).
    const message = await resolveMessageId(db, key, q.messageId);
    if (!message) {
      return { messages: [], next_cursor: null };
    }
    // created_at compared in SQL: it has microseconds, a Date would round them away.
    params.push(message.messageId);
    where.push(`r.created_at = (SELECT m0.created_at FROM messages m0 WHERE m0.id = $${params.length})`, `r.message_id = $${params.length}`);
    if (message.publicId !== null) {
      params.push(message.publicId);
      where.push(`r.public_id = $${params.length}`);
    }
  }
  if (q.from && q.to) {
    params.push(q.from, q.to);
    where.push(`r.created_at >= $${params.length - 1}`, `r.created_at < $${params.length}`);
  }
  if (!key.isPrimary) {
    params.push(key.id);
    where.push(`r.key_id = $${params.length}`);
  }
  if (q.cursor) {
    params.push(q.cursor.at, q.cursor.id);
    where.push(`(r.created_at, r.id) > ($${params.length - 1}::timestamptz, $${params.length}::bigint)`);
  }
  if (q.tag !== undefined) {
    params.push(q.tag);
    where.push(`r.tag = $${params.length}`);
  }
  if (q.phone) {
    if (q.phone.e164 !== null) {
      params.push(q.phone.e164);
      where.push(`r.phone = $${params.length}`);
    } else {
      // A number that cannot be normalised was stored as given (phone null, rejected [302]).
      params.push(q.phone.raw);
      where.push(`(r.phone IS NULL AND r.raw_phone = $${params.length})`);
    }
  }
  params.push(q.limit + 1);
  // State, times, text and sender are the attempts': the current step's for the state, text and
  // sender, every step's for the channels taken and the first times sent/delivered. body: the text
  // that was (or will be) sent; an attempt keeps it only where it is not the message's body (a
  // verification message's body is its template with the code masked, D8).
  const { rows } = await db.query<Row>(
    `SELECT r.id,
            to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS cursor_at,
            r.public_id AS message_id,
            COALESCE(cur.parts, 0) AS message_parts,
            COALESCE(floor(extract(epoch FROM t.sent_at))::bigint, 0) AS ts_sent,
            COALESCE(floor(extract(epoch FROM t.delivered_at))::bigint, 0) AS ts_delivered,
            (t.sent_at IS NOT NULL OR cur.state IN ('sent', 'delivered', 'seen')) AS sent,
            (t.delivered_at IS NOT NULL OR cur.state IN ('delivered', 'seen')) AS delivered,
            COALESCE(cur.state IN ('undelivered', 'rejected', 'failed'), false) AS nondelivered,
            COALESCE(cur.body, m.body, '') AS body,
            COALESCE(cur.sender, '') AS sender,
            COALESCE(r.phone, r.raw_phone) AS "to",
            COALESCE(t.flow, '') AS flow
       FROM (SELECT r.id, r.created_at, r.public_id, r.message_id, r.step, r.phone, r.raw_phone
               FROM recipients r
              WHERE ${where.join(' AND ')}
              ORDER BY r.created_at, r.id
              LIMIT $${params.length}) r
       JOIN messages m ON m.id = r.message_id
       LEFT JOIN attempts cur ON cur.recipient_id = r.id AND cur.step = r.step
       LEFT JOIN LATERAL (SELECT min(a.sent_at) AS sent_at, min(a.delivered_at) AS delivered_at,
                                 string_agg(a.channel, ',' ORDER BY a.step) AS flow
                            FROM attempts a WHERE a.recipient_id = r.id) t ON true
      ORDER BY r.created_at, r.id`,
    params,
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  const last = page[page.length - 1];
  return {
    messages: page.map((r) => ({
      message_id: r.message_id,
      message_parts: r.message_parts,
      ts_sent: r.ts_sent,
      ts_delivered: r.ts_delivered,
      sent: r.sent ? 1 : 0,
      delivered: r.delivered ? 1 : 0,
      nondelivered: r.nondelivered ? 1 : 0,
      body: r.body,
      sender: r.sender,
      to: r.to,
      flow: r.flow,
    })),
    next_cursor: more && last ? encodeCursor(last.cursor_at, last.id) : null,
  };
}
