/**
 * Message lookup with a status timeline (issue 27, `GET /v2/messages/{id}`): per recipient its
 * number, current result, price and parts, every attempt (channel, carrier, sender, times, carrier
 * refs, why it ended) and every event with where its webhook went.
 *
 * Read only from what the send path stores anyway, through indexes it has anyway: the message by
 * its primary key (an exact id, or for a single call's recipient id the 18-character prefix range,
 * sending/ids.ts); its recipients by `(account_id, created_at)` with the message's `created_at`
 * (the statement that wrote the message wrote them, as the recovery sweep relies on); attempts by
 * `(recipient_id, step)`, carrier refs by attempt, events by recipient, batches as webhooks.ts says.
 */
import type { Queryable } from '../db/pool.js';
import { stepOf, type AttemptState, type Channel, type FlowStep } from '../channels/index.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { parseIdRef, type IdRef } from '../sending/ids.js';
import { endReason, type EndReason } from './reasons.js';
import { webhookStatuses, type WebhookStatus } from './webhooks.js';

type KeyRef = Pick<ApiKeyRecord, 'id' | 'accountId' | 'isPrimary'>;

/** The message a lookup id names, and which of its recipients (null: all). */
export interface ResolvedId {
  messageId: string;
  accountId: number;
  /** To the millisecond (Postgres keeps microseconds: compare in SQL, not with this). */
  createdAt: Date;
  requestId: string;
  tag: string;
  /** The one recipient named (a per-recipient id), or null for the whole message. */
  publicId: string | null;
}

interface RecipientRow {
  id: number;
  public_id: string;
  idx: number;
  phone: string | null;
  raw_phone: string;
  state: string;
  step: number;
  due_at: Date | null;
  message_id: string;
  account_id: number;
  key_id: number;
  created_at: Date;
  request_id: string;
  tag: string;
  /** The message's flow: the channel a recipient fell back to before its next attempt exists. */
  flow: FlowStep[];
}

/**
 * The recipients of the message an id names, if the key may see it: its own messages, and a
 * primary key also its sub-keys'. Anything else is null (the caller answers 404).
 */
async function findRecipients(db: Queryable, key: KeyRef, ref: IdRef): Promise<{ resolved: ResolvedId; recipients: RecipientRow[] } | null> {
  const messageWhere = ref.kind === 'indexed' ? 'm.id = $3' : 'm.id >= $3 AND m.id < $4';
  const params: unknown[] = [key.accountId, key.isPrimary ? null : key.id];
  params.push(...(ref.kind === 'indexed' ? [ref.messageId] : [ref.prefix, `${ref.prefix}~`]));
  const { rows } = await db.query<RecipientRow>(
    `SELECT r.id, r.public_id, r.idx, r.phone, r.raw_phone, r.state, r.step, r.due_at, m.id AS message_id, m.account_id, m.key_id,
            m.created_at, m.request_id, m.tag, m.flow
       FROM messages m
       JOIN recipients r ON r.account_id = m.account_id AND r.created_at = m.created_at AND r.message_id = m.id
      WHERE ${messageWhere} AND m.account_id = $1 AND ($2::bigint IS NULL OR m.key_id = $2)
      ORDER BY m.id, r.idx`,
    params,
  );
  let chosen: RecipientRow[];
  let publicId: string | null = null;
  if (ref.kind === 'indexed') {
    publicId = `${ref.messageId}-${ref.index}`;
    chosen = rows.filter((r) => r.public_id === publicId);
  } else {
    // A single call's recipient id, else a message id (ids of one prefix are one message but by chance).
    const one = rows.filter((r) => r.public_id === ref.id);
    if (one.length > 0) {
      publicId = ref.id;
      chosen = one;
    } else {
      chosen = rows.filter((r) => r.message_id === ref.id);
    }
  }
  const first = chosen[0];
  if (!first) {
    return null;
  }
  return {
    resolved: {
      messageId: first.message_id, accountId: first.account_id, createdAt: first.created_at, requestId: first.request_id, tag: first.tag, publicId,
    },
    recipients: chosen,
  };
}

/** What a `message_id` filter of the REST list names, or null (unknown, malformed, or not the key's). */
export async function resolveMessageId(db: Queryable, key: KeyRef, id: string): Promise<ResolvedId | null> {
  const ref = parseIdRef(id);
  return ref ? (await findRecipients(db, key, ref))?.resolved ?? null : null;
}

export interface AttemptView {
  step: number;
  gateway: Channel;
  carrier: string;
  sender: string;
  result: AttemptState;
  result_info: string;
  parts: number;
  price_czk: number;
  price_eur: number;
  charged: number;
  currency: string | null;
  refunded: boolean;
  created_at: string;
  /** When it was handed to its carrier (null: refused before leaving, or not yet handed). */
  handed_at: string | null;
  /** When the carrier answered that it took the message (reached `sent`). */
  answered_at: string | null;
  /** When the final receipt came (delivered, or the final failure after `sent`). */
  receipt_at: string | null;
  carrier_refs: Array<{ ref: string; part: number; state: string }>;
  /** Why it ended without success (null: it succeeded or may still). */
  end_reason: EndReason | null;
  /** The step the flow moved on to because of it. */
  fell_back_to: Channel | null;
}

export interface EventView {
  event_id: number;
  type: string;
  gateway: string | null;
  result: string | null;
  result_info: string | null;
  timestamp: number | null;
  created_at: string;
  webhook: WebhookStatus;
}

export interface RecipientView {
  message_id: string;
  request_id: string;
  phone_number: string;
  tag: string;
  result: string;
  result_info: string;
  gateway: Channel | null;
  /** What the recipient cost: attempts charged and not refunded. */
  price_czk: number;
  price_eur: number;
  parts: number;
  created_at: string;
  attempts: AttemptView[];
  events: EventView[];
}

export interface MessageLookup {
  message_id: string;
  request_id: string;
  created_at: string;
  recipients: RecipientView[];
}

interface AttemptRow {
  id: number;
  recipient_id: number;
  step: number;
  channel: Channel;
  carrier: string;
  sender: string;
  state: AttemptState;
  result_info: string;
  parts: number;
  price_czk: number;
  price_eur: number;
  charged: number;
  charged_currency: string | null;
  refunded: boolean;
  reached_sent: boolean;
  created_at: Date;
  updated_at: Date;
  handed_at: Date | null;
  sent_at: Date | null;
  delivered_at: Date | null;
}

interface EventRow {
  id: number;
  recipient_id: number;
  kind: string;
  body: string;
  callback_url: string | null;
  created_at: Date;
}

/** Refusals of the service itself: the attempt never left for its carrier. */
const REFUSED_BEFORE_LEAVING: ReadonlySet<EndReason> = new Set(['insufficient_credit', 'opted_out', 'no_route', 'invalid_number']);

const iso = (d: Date | null): string | null => d?.toISOString() ?? null;
const round4 = (x: number): number => Math.round(x * 10000) / 10000;

/** The message (or the one recipient) an id names, with each recipient's timeline; null when the key may not see it. */
export async function lookupMessage(db: Queryable, key: KeyRef, id: string): Promise<MessageLookup | null> {
  const ref = parseIdRef(id);
  const found = ref && await findRecipients(db, key, ref);
  if (!found) {
    return null;
  }
  const recipientIds = found.recipients.map((r) => r.id);
  const [attempts, events] = await Promise.all([
    db.query<AttemptRow>(
      `SELECT id, recipient_id, step, channel, carrier, sender, state, result_info, parts, price_czk, price_eur, charged, charged_currency,
              refunded, reached_sent, created_at, updated_at, handed_at, sent_at, delivered_at
         FROM attempts WHERE recipient_id = ANY($1::bigint[]) ORDER BY recipient_id, step`,
      [recipientIds]),
    db.query<EventRow>(
      'SELECT id, recipient_id, kind, body, callback_url, created_at FROM events WHERE recipient_id = ANY($1::bigint[]) ORDER BY id',
      [recipientIds]),
  ]);
  const attemptIds = attempts.rows.map((a) => a.id);
  const [refs, webhooks] = await Promise.all([
    attemptIds.length === 0 ? { rows: [] } : db.query<{ attempt_id: number; ref: string; part: number; state: string }>(
      'SELECT attempt_id, ref, part, state FROM carrier_refs WHERE attempt_id = ANY($1::bigint[]) ORDER BY attempt_id, part', [attemptIds]),
    webhookStatuses(db, events.rows.map((e) => ({ id: e.id, callbackUrl: e.callback_url }))),
  ]);
  return {
    message_id: id,
    request_id: found.resolved.requestId,
    created_at: found.resolved.createdAt.toISOString(),
    recipients: found.recipients.map((r) => recipientView(
      r, attempts.rows.filter((a) => a.recipient_id === r.id), events.rows.filter((e) => e.recipient_id === r.id), refs.rows, webhooks)),
  };
}

function recipientView(
  r: RecipientRow, attempts: AttemptRow[], events: EventRow[], refs: ReadonlyArray<{ attempt_id: number; ref: string; part: number; state: string }>,
  webhooks: Map<number, WebhookStatus>,
): RecipientView {
  const current = attempts.find((a) => a.step === r.step) ?? null;
  let priceCzk = 0;
  let priceEur = 0;
  const views: AttemptView[] = attempts.map((a) => {
    if (a.charged > 0 && !a.refunded) {
      priceCzk += a.price_czk;
      priceEur += a.price_eur;
    }
    const reason = endReason(a.state, a.result_info);
    // The step that followed: its attempt, or (while it waits for its time, before its attempt
    // exists) the flow's next step, once the recipient has moved on to it.
    const next = attempts.find((b) => b.step === a.step + 1)?.channel
      ?? (r.step > a.step && r.flow[a.step + 1] ? stepOf(r.flow[a.step + 1]!).channel : undefined);
    const refused = reason !== null && REFUSED_BEFORE_LEAVING.has(reason);
    const final = a.state === 'undelivered' || a.state === 'failed' || a.state === 'rejected';
    return {
      step: a.step, gateway: a.channel, carrier: a.carrier, sender: a.sender, result: a.state, result_info: a.result_info, parts: a.parts,
      price_czk: round4(a.price_czk), price_eur: round4(a.price_eur), charged: round4(a.charged), currency: a.charged_currency,
      refunded: a.refunded, created_at: a.created_at.toISOString(),
      handed_at: refused ? null : iso(a.handed_at),
      answered_at: iso(a.sent_at),
      receipt_at: iso(a.delivered_at) ?? (final && a.reached_sent ? a.updated_at.toISOString() : null),
      carrier_refs: refs.filter((c) => c.attempt_id === a.id).map((c) => ({ ref: c.ref, part: c.part, state: c.state })),
      end_reason: reason,
      fell_back_to: reason !== null && next ? next : null,
    };
  });
  return {
    message_id: r.public_id,
    request_id: r.request_id,
    phone_number: r.phone ?? r.raw_phone,
    tag: r.tag,
    result: current?.state ?? (r.state === 'test' ? 'accepted' : 'queued'),
    result_info: current?.result_info ?? (r.state === 'test' ? 'Test number: accepted, never sent' : r.due_at ? `Waiting until ${r.due_at.toISOString()}` : 'Queued'),
    gateway: current?.channel ?? null,
    price_czk: round4(priceCzk),
    price_eur: round4(priceEur),
    parts: current?.parts ?? 0,
    created_at: r.created_at.toISOString(),
    attempts: views,
    events: events.map((e) => eventView(e, webhooks.get(e.id) ?? { status: 'none' })),
  };
}

function eventView(e: EventRow, webhook: WebhookStatus): EventView {
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(e.body) as Record<string, unknown>;
  } catch {
    // an event body is always JSON; a view without its fields is better than no lookup
  }
  const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  return {
    event_id: e.id, type: e.kind, gateway: text(body.gateway), result: text(body.result), result_info: text(body.result_info),
    timestamp: typeof body.timestamp === 'number' ? body.timestamp : null, created_at: e.created_at.toISOString(), webhook,
  };
}
