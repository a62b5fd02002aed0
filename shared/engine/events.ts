/** Outbox events: the webhook bodies of the spec's Events part, written in the transaction of the change they report. */
import type { Queryable } from '../db/pool.js';
import type { AttemptState, Channel } from '../carriers/types.js';
import { eventChannelKey } from './transitions.js';

export interface OutboxEvent {
  accountId: number;
  keyId: number | null;
  /** Resolved per D4 (message callback, else key default); null keeps the event without sending it. */
  callbackUrl: string | null;
  recipientId: number | null;
  kind: 'sentMessage' | 'incomingReplyMessage' | 'incomingMessage';
  body: Record<string, unknown>;
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

/** A `sentMessage` event with exactly the spec's fields. `payload` is null when the message had none. */
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
    payload: f.payload === null ? null : (JSON.parse(f.payload) as unknown),
    type: 'outgoing',
    to: { phone_number: f.phone },
    result: f.state,
    result_info: f.resultInfo,
    [eventChannelKey(f.channel)]: channelObject,
  };
}

/** Append events to the outbox in one statement; ids follow the order given (per-recipient order is kept). */
export async function insertEvents(db: Queryable, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) {
    return;
  }
  await db.query(
    `INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body)
     SELECT account_id, key_id, callback_url, recipient_id, kind, body
       FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[]) WITH ORDINALITY
         AS u(account_id, key_id, callback_url, recipient_id, kind, body, n)
      ORDER BY n`,
    [events.map((e) => e.accountId), events.map((e) => e.keyId), events.map((e) => e.callbackUrl),
      events.map((e) => e.recipientId), events.map((e) => e.kind), events.map((e) => JSON.stringify(e.body))],
  );
}
