/** Outbox events: the webhook bodies of the spec's Events part, written in the transaction of the change they report. */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { arrayRows, numberArray, textArray } from '../db/arrays.js';
import { JsonBytes } from './event-json.js';
import { namedParams } from '../db/params.js';
import { writeSentMessage, type SentMessageFacts } from './sent-message.js';
import { countAttemptResult } from '../metrics.js';

export type { SentMessageFacts } from './sent-message.js';

export interface OutboxEvent {
  accountId: number;
  keyId: number | null;
  /** Resolved per D4 (message callback, else key default); null keeps the event without sending it. */
  callbackUrl: string | null;
  recipientId: number | null;
  kind: 'sentMessage' | 'incomingReplyMessage' | 'incomingMessage';
  /** The event object, its JSON text, or the facts of a `sentMessage` event (written by `eventParams`). */
  body: Record<string, unknown> | RawJson | SentMessageBody;
}

/** JSON text to embed as it is (a customer's payload comes back byte for byte). */
export class RawJson {
  constructor(readonly text: string) {}
}

/**
 * A `sentMessage` event's body as its facts: `eventParams` writes its JSON (sent-message.ts)
 * straight into the statement's parameter, no string made for it.
 */
export class SentMessageBody {
  constructor(readonly facts: SentMessageFacts) {}
}

// A per-process marker that no event string can contain by accident.
const MARK = `\u0000raw${randomBytes(6).toString('hex')}\u0000`;
const MARK_IN_JSON = JSON.stringify(MARK).slice(1, -1);
const MARKER_RE = new RegExp(`"${MARK_IN_JSON.replace(/\\/g, '\\\\')}(\\d+)${MARK_IN_JSON.replace(/\\/g, '\\\\')}"`, 'g');

/**
 * JSON.stringify that writes RawJson values as their own text. RawJson is looked for at the top
 * level only (where events carry `payload`): a replacer function would be called for every key of
 * every event, which made this the send path's largest JavaScript cost after pg's array escaping.
 */
export function stringifyEvent(body: Record<string, unknown>): string {
  let raws: string[] | null = null;
  let plain = body;
  for (const key in body) {
    const value = body[key];
    if (value instanceof RawJson) {
      if (raws === null) {
        raws = [];
        plain = { ...body };
      }
      plain[key] = `${MARK}${raws.push(value.text) - 1}${MARK}`;
    }
  }
  const text = JSON.stringify(plain);
  if (raws === null) {
    return text;
  }
  const texts = raws;
  return text.replace(MARKER_RE, (_m, i: string) => texts[Number(i)]!);
}

/**
 * The payload field of events: the stored text, or undefined when the message had none, which
 * JSON.stringify leaves out (D4: omitted, never null).
 */
export function payloadField(stored: string | null): RawJson | undefined {
  return stored === null ? undefined : new RawJson(stored);
}

/** One writer per process for the bodies of a statement (reset per use; it keeps its buffer). */
const bodyBytes = new JsonBytes();

/** The parameters of the events insert, named (see `eventsCtes`). */
export const EVENT_PARAMS = ['event_account', 'event_key', 'event_callback', 'event_recipient', 'event_kind', 'event_bodies'] as const;
export type EventParam = (typeof EVENT_PARAMS)[number];

/**
 * The events insert as two CTEs (`events_in`, `outbox_in`) over the six parameters `EVENT_PARAMS`
 * (numbered by the caller's statement, see db/params.ts; values from `eventParams`), so a caller can
 * write its events in the statement of its other changes.
 * Ids follow the order given (per-recipient order is kept). The ids of the events with a callback
 * URL go into one `outbox` row, which the relay deletes once it has put them into webhook batches.
 * `onlyRecipientsOf`: the name of an earlier CTE with a `recipient_id` column; only events of those
 * recipients are written (the statement's guarded insert decides which changes happened).
 */
export function eventsCtes($: Readonly<Record<EventParam, string>>, onlyRecipientsOf?: string): string {
  // The bodies travel as one text, joined by BODY_SEPARATOR, rather than a text[] parameter:
  // escaping each body into an array literal was the send path's largest JavaScript cost. Splitting
  // on a character no JSON text contains costs Postgres less than lexing the bodies as one JSON
  // array (json_array_elements; docs/benchmarks.md).
  const rows = arrayRows({
    account_id: `${$.event_account}::bigint[]`, key_id: `${$.event_key}::bigint[]`, callback_url: `${$.event_callback}::text[]`,
    recipient_id: `${$.event_recipient}::bigint[]`, kind: `${$.event_kind}::text[]`,
    body: `string_to_array(${$.event_bodies}::text, chr(1))`,
  });
  // The filter is a scalar subquery's array, computed once, not a join: the rows keep their order.
  // The outbox row lists the ids ascending: the message lookup finds a queued event by the span
  // from the row's first id to its last (migration 025, lookup/webhooks.ts).
  return `events_in AS (
       INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body)
       SELECT u.account_id, u.key_id, u.callback_url, u.recipient_id, u.kind, u.body
         FROM ${rows} AS u${onlyRecipientsOf ? `
        WHERE u.recipient_id = ANY(ARRAY(SELECT recipient_id FROM ${onlyRecipientsOf}))` : ''}
       RETURNING id, callback_url),
     outbox_in AS (INSERT INTO outbox (event_ids)
       SELECT array_agg(id ORDER BY id) FROM events_in WHERE callback_url IS NOT NULL HAVING count(*) > 0)`;
}

/**
 * Separates the event bodies in the one text parameter of `eventsCtes`. U+0001 never occurs in a
 * JSON text: JSON.stringify escapes control characters, and a customer's payload embedded as it is
 * was stored in a json column, whose input check rejects an unescaped control character.
 */
export const BODY_SEPARATOR = '\u0001';
const BODY_SEPARATOR_BYTE = BODY_SEPARATOR.charCodeAt(0);

/**
 * The values of `EVENT_PARAMS`. The bodies, joined by BODY_SEPARATOR, are one Buffer of
 * UTF-8: pg sends a Buffer parameter in binary format, which for `text` is those bytes.
 *
 * `bodies: 'borrow'` hands over the writer's own memory instead of a copy, valid only until the
 * next call. Only for parameters passed straight to `query` of a client that is not running
 * another query (a transaction's, between awaited statements): pg then writes the Bind message,
 * copying the bytes, before `query` returns. The send path's statements do: the copy they save is
 * one large allocation per batch outside the heap, which raised the SMS worker's memory over a run
 * (docs/benchmarks.md).
 */
export function eventParams(events: OutboxEvent[], bodies: 'copy' | 'borrow' = 'copy'): Record<EventParam, unknown> {
  // One loop and no closures made per call (docs/architecture.md, "Hot loops").
  const accountId: number[] = [], keyId: Array<number | null> = [], callbackUrl: Array<string | null> = [];
  const recipientId: Array<number | null> = [], kind: string[] = [];
  bodyBytes.reset();
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    accountId.push(e.accountId);
    keyId.push(e.keyId);
    callbackUrl.push(e.callbackUrl);
    recipientId.push(e.recipientId);
    kind.push(e.kind);
    if (i > 0) {
      bodyBytes.byte(BODY_SEPARATOR_BYTE);
    }
    const body = e.body;
    if (body instanceof SentMessageBody) {
      countAttemptResult(body.facts.channel, body.facts.state);
      writeSentMessage(bodyBytes, body.facts);
    } else {
      if (e.kind === 'sentMessage' && !(body instanceof RawJson)) countAttemptResult(String(body.gateway), String(body.result));
      bodyBytes.utf8(body instanceof RawJson ? body.text : stringifyEvent(body));
    }
  }
  return {
    event_account: numberArray(accountId), event_key: numberArray(keyId), event_callback: textArray(callbackUrl),
    event_recipient: numberArray(recipientId), event_kind: textArray(kind),
    event_bodies: bodies === 'borrow' ? bodyBytes.view() : bodyBytes.toBuffer(),
  };
}

/** Append events in one statement (see `eventsCtes`). */
export async function insertEvents(db: Queryable, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) {
    return;
  }
  await db.query(INSERT_EVENTS_SQL, INSERT_EVENTS.values(eventParams(events)));
}

const INSERT_EVENTS = namedParams(EVENT_PARAMS);
const INSERT_EVENTS_SQL = `WITH ${eventsCtes(INSERT_EVENTS.$)} SELECT 1`;
