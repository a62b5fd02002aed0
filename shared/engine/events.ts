/** Outbox events: the webhook bodies of the spec's Events part, written in the transaction of the change they report. */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { numberArray, textArray } from '../db/arrays.js';
import type { AttemptState, Channel } from '../carriers/types.js';
import { eventChannelKey } from './transitions.js';

export interface OutboxEvent {
  accountId: number;
  keyId: number | null;
  /** Resolved per D4 (message callback, else key default); null keeps the event without sending it. */
  callbackUrl: string | null;
  recipientId: number | null;
  kind: 'sentMessage' | 'incomingReplyMessage' | 'incomingMessage';
  /** The event object, or its JSON text already written (`sentMessageJson`). */
  body: Record<string, unknown> | RawJson;
}

export interface SentMessageFacts {
  requestId: string;
  publicId: string;
  channel: Channel;
  /** The stored payload text (json column), or null. */
  payload: string | null;
  phone: string;
  state: AttemptState;
  resultInfo: string;
  at: number;
  sender: string;
  country: number;
  operator: number;
  priceCzk: number;
  priceEur: number;
  count: number;
  smsGateway: string | null;
}

const round4 = (x: number) => Math.round(x * 10000) / 10000;

/** JSON text to embed as it is (a customer's payload comes back byte for byte). */
export class RawJson {
  constructor(readonly text: string) {}
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

/** The payload field of events: the stored text, or null when the message had none. */
export function payloadField(stored: string | null): RawJson | null {
  return stored === null ? null : new RawJson(stored);
}

/**
 * A `sentMessage` event with exactly the spec's fields, as an object. `payload` is null when the
 * message had none. The send path writes the same text directly (`sentMessageJson`); this is its
 * readable definition, and the tests hold the two to the same bytes.
 */
export function sentMessageEvent(f: SentMessageFacts): Record<string, unknown> {
  const channelObject: Record<string, unknown> = {
    sender: f.sender,
    country: f.country,
    operator: f.operator,
    price_czk: round4(f.priceCzk),
    price_eur: round4(f.priceEur),
    count: f.count,
  };
  if (f.channel === 'sms') {
    channelObject.gateway = f.smsGateway ?? 'high';
  }
  return {
    request_id: f.requestId,
    message_id: f.publicId,
    gateway: f.channel,
    timestamp: Math.floor(f.at / 1000),
    payload: payloadField(f.payload),
    type: 'outgoing',
    to: { phone_number: f.phone },
    result: f.state,
    result_info: f.resultInfo,
    [eventChannelKey(f.channel)]: channelObject,
  };
}

const quote = JSON.stringify;

/** A number as JSON.stringify writes it (non-finite numbers as null). */
const jsonNumber = (n: number): string => (Number.isFinite(n) ? String(n) : 'null');

/**
 * The JSON text of `sentMessageEvent(f)`, byte for byte, written directly: the send path writes
 * three of these per recipient, and building each event as objects first (the event, its channel
 * object, a copy for the raw payload) and then stringifying it and splicing the payload in was
 * the SMS worker's largest allocation after pg's rows and about 4 % of its CPU (`--cpu-prof`).
 * Table-tested against `stringifyEvent(sentMessageEvent(f))`.
 */
export function sentMessageJson(f: SentMessageFacts): RawJson {
  let channelObject = `{"sender":${quote(f.sender)},"country":${jsonNumber(f.country)},"operator":${jsonNumber(f.operator)},`
    + `"price_czk":${jsonNumber(round4(f.priceCzk))},"price_eur":${jsonNumber(round4(f.priceEur))},"count":${jsonNumber(f.count)}`;
  if (f.channel === 'sms') {
    channelObject += `,"gateway":${quote(f.smsGateway ?? 'high')}`;
  }
  return new RawJson(`{"request_id":${quote(f.requestId)},"message_id":${quote(f.publicId)},"gateway":${quote(f.channel)},`
    + `"timestamp":${jsonNumber(Math.floor(f.at / 1000))},"payload":${f.payload ?? 'null'},"type":"outgoing",`
    + `"to":{"phone_number":${quote(f.phone)}},"result":${quote(f.state)},"result_info":${quote(f.resultInfo)},`
    + `${quote(eventChannelKey(f.channel))}:${channelObject}}}`);
}

/**
 * The events insert as two CTEs (`events_in`, `outbox_in`) over six array parameters from `$first`
 * on (see `eventParams`), so a caller can write its events in the statement of its other changes.
 * Ids follow the order given (per-recipient order is kept). The ids of the events with a callback
 * URL go into one `outbox` row, which the relay deletes once it has put them into webhook batches.
 * `onlyRecipientsOf`: the name of an earlier CTE with a `recipient_id` column; only events of those
 * recipients are written (the statement's guarded insert decides which changes happened).
 */
export function eventsCtes(first: number, onlyRecipientsOf?: string): string {
  const p = (i: number) => `$${first + i}`;
  // The bodies travel as one text, joined by BODY_SEPARATOR, rather than a text[] parameter:
  // escaping each body into an array literal was the send path's largest JavaScript cost. Splitting
  // on a character no JSON text contains costs Postgres less than lexing the bodies as one JSON
  // array (json_array_elements: json_lex was ~4 % of Postgres' CPU on the send path).
  return `events_in AS (
       INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body)
       SELECT u.account_id, u.key_id, u.callback_url, u.recipient_id, u.kind, b.body
         FROM unnest(${p(0)}::bigint[], ${p(1)}::bigint[], ${p(2)}::text[], ${p(3)}::bigint[], ${p(4)}::text[]) WITH ORDINALITY
           AS u(account_id, key_id, callback_url, recipient_id, kind, n)
         JOIN unnest(string_to_array(${p(5)}::text, chr(1))) WITH ORDINALITY AS b(body, n) USING (n)${onlyRecipientsOf ? `
        WHERE u.recipient_id IN (SELECT recipient_id FROM ${onlyRecipientsOf})` : ''}
        ORDER BY n
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

/** The six parameters of `eventsCtes`. */
export function eventParams(events: OutboxEvent[]): unknown[] {
  // One loop, no per-call closures: V8 keeps a closure's optimised code only weakly, so short-lived
  // arrows were optimised again after every full collection (see attemptColumns in dispatch.ts).
  const accountId: number[] = [], keyId: Array<number | null> = [], callbackUrl: Array<string | null> = [];
  const recipientId: Array<number | null> = [], kind: string[] = [], bodies: string[] = [];
  for (const e of events) {
    accountId.push(e.accountId);
    keyId.push(e.keyId);
    callbackUrl.push(e.callbackUrl);
    recipientId.push(e.recipientId);
    kind.push(e.kind);
    bodies.push(e.body instanceof RawJson ? e.body.text : stringifyEvent(e.body));
  }
  return [numberArray(accountId), numberArray(keyId), textArray(callbackUrl), numberArray(recipientId), textArray(kind),
    bodies.join(BODY_SEPARATOR)];
}

/** Append events in one statement (see `eventsCtes`). */
export async function insertEvents(db: Queryable, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) {
    return;
  }
  await db.query(`WITH ${eventsCtes(1)} SELECT 1`, eventParams(events));
}
