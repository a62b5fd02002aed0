/**
 * Meta's webhook side (channels.md 1.4): the verification handshake, the `X-Hub-Signature-256`
 * check over the raw bytes, and the envelope read into carrier-neutral CallbackEvents. Pure
 * functions; nothing here throws on what a caller sends.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CallbackEvent, ReceiptStatus } from '../http-carrier.js';
import { errorInfo, readGraphError } from './errors.js';

const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/** The header value Meta sends for these bytes: `sha256=` + lower-case hex HMAC-SHA256 keyed with the app secret. */
export function signatureHeader(rawBody: Buffer | string, appSecret: string): string {
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

/**
 * Whether `header` is Meta's signature of exactly these bytes. Computed over the raw buffer
 * (Meta escapes non-ASCII in its JSON, so a re-serialised body would not match); false for a
 * missing, malformed or wrong header and for an empty secret.
 */
export function verifySignature(rawBody: Buffer, header: string | undefined, appSecret: string): boolean {
  if (typeof header !== 'string' || appSecret === '') return false;
  const m = SIGNATURE.exec(header.trim());
  if (!m) return false;
  const given = Buffer.from(m[1]!.toLowerCase(), 'hex');
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function sameSecret(a: string, b: string): boolean {
  // Compare digests so the comparison takes the same time whatever the lengths.
  const da = createHmac('sha256', 'verify-token').update(a).digest();
  const db = createHmac('sha256', 'verify-token').update(b).digest();
  return timingSafeEqual(da, db);
}

/** The GET handshake: 200 with `hub.challenge` when `hub.mode` is `subscribe` and the token matches, else 403. */
export function handshake(query: URLSearchParams, verifyToken: string): { status: number; body: string } {
  const token = query.get('hub.verify_token');
  const challenge = query.get('hub.challenge');
  const ok = query.get('hub.mode') === 'subscribe' && token !== null && verifyToken !== '' && sameSecret(token, verifyToken) && challenge !== null;
  return ok ? { status: 200, body: challenge } : { status: 403, body: 'Forbidden' };
}

// ---------------------------------------------------------------------------
// Envelope

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Beyond this (the year 5138) a timestamp is not a time a status happened: a Date or Postgres would refuse it. */
const MAX_UNIX_SECONDS = 1e11;

/**
 * Meta's unix-second timestamps (strings) → milliseconds; `fallback` when absent or unreadable,
 * or out of range (a number such as 1e300 failed the whole body with a 500, or its status batch).
 */
function millis(v: unknown, fallback: number): number {
  const n = typeof v === 'string' && /^\d{1,12}$/.test(v) ? Number(v) : typeof v === 'number' && Number.isFinite(v) ? v : NaN;
  return Number.isFinite(n) && n > 0 && n < MAX_UNIX_SECONDS ? n * 1000 : fallback;
}

const STATUSES: Readonly<Record<string, ReceiptStatus>> = {
  sent: 'sent',
  delivered: 'delivered',
  read: 'seen',
  failed: 'undelivered',
};

class Malformed extends Error {}

function need<T>(value: T | undefined, path: string, what: string): T {
  if (value === undefined) throw new Malformed(`${path} ${what}`);
  return value;
}

function arrayAt(parent: Obj, key: string, path: string): unknown[] {
  const v = parent[key];
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new Malformed(`${path}.${key} is not an array`);
  return v;
}

function objectAt(items: unknown[], i: number, path: string): Obj {
  const v = items[i];
  if (!isObj(v)) throw new Malformed(`${path}[${i}] is not an object`);
  return v;
}

function statusEvent(item: Obj, path: string, now: number): CallbackEvent | null {
  const carrierRef = need(str(item.id), path, 'has no id');
  const raw = need(str(item.status), path, 'has no status');
  const status = STATUSES[raw];
  if (!status) return null; // `played` (voice) and statuses we do not track
  const event: CallbackEvent & { kind: 'receipt' } = { kind: 'receipt', carrierRef, status, at: millis(item.timestamp, now) };
  const ourRef = str(item.biz_opaque_callback_data);
  if (ourRef !== undefined) event.ourRef = ourRef;
  if (raw === 'failed') {
    const first = Array.isArray(item.errors) ? readGraphError(item.errors[0]) : null;
    if (first?.code !== undefined) {
      event.code = first.code;
      event.info = errorInfo(first.code, first.title);
    } else {
      event.info = errorInfo(0, first?.title ?? 'Failed');
    }
  }
  return event;
}

/** The text a person sent: a text body, a template quick-reply button's text, or an interactive reply's title. */
function inboundText(msg: Obj): string | undefined {
  switch (msg.type) {
    case 'text':
      return isObj(msg.text) ? str(msg.text.body) : undefined;
    case 'button':
      return isObj(msg.button) ? (str(msg.button.text) ?? str(msg.button.payload)) : undefined;
    case 'interactive': {
      if (!isObj(msg.interactive)) return undefined;
      const reply = msg.interactive.button_reply ?? msg.interactive.list_reply;
      return isObj(reply) ? str(reply.title) : undefined;
    }
    default:
      return undefined;
  }
}

function inboundEvent(msg: Obj, contacts: unknown[], to: string | undefined, path: string, now: number): CallbackEvent | null {
  const text = inboundText(msg);
  if (text === undefined) return null; // media, reactions, system messages: not carried
  const carrierRef = need(str(msg.id), path, 'has no id');
  const receiver = need(to, path, 'arrived without metadata.phone_number_id');
  const from = str(msg.from);
  const contact = contacts.find((c): c is Obj => isObj(c) && from !== undefined && c.wa_id === from)
    ?? (contacts.length === 1 && isObj(contacts[0]) ? contacts[0] : undefined);
  const fromUserId = str(msg.from_user_id) ?? str(contact?.user_id);
  if (from === undefined && fromUserId === undefined) throw new Malformed(`${path} has neither from nor a user id`);
  const event: CallbackEvent & { kind: 'inbound' } = { kind: 'inbound', to: receiver, text, at: millis(msg.timestamp, now), carrierRef };
  if (from !== undefined) event.from = from;
  if (fromUserId !== undefined) event.fromUserId = fromUserId;
  const replyTo = isObj(msg.context) ? str(msg.context.id) : undefined;
  if (replyTo !== undefined) event.replyToCarrierRef = replyTo;
  return event;
}

function eventKey(e: CallbackEvent): string {
  return e.kind === 'receipt' ? `r ${e.carrierRef} ${e.status}` : `i ${e.carrierRef}`;
}

/**
 * The receipts and inbound texts of one webhook body (already JSON-parsed), in body order, every
 * entry, change and item. Changes other than `messages` (account_update, template status, …)
 * give no events; see `parseAccountUpdates`. An item repeated inside one body is reported once.
 * A body that is not Meta's envelope, or an item missing what identifies it, gives `{error}`
 * naming the place.
 */
export function parseWebhook(body: unknown, now: number = Date.now()): CallbackEvent[] | { error: string } {
  try {
    const events: CallbackEvent[] = [];
    const seen = new Set<string>();
    for (const { value, path } of changesOf(body, 'messages')) {
      const metadata = isObj(value.metadata) ? value.metadata : undefined;
      const to = str(metadata?.phone_number_id);
      const contacts = arrayAt(value, 'contacts', path);
      const statuses = arrayAt(value, 'statuses', path);
      const messages = arrayAt(value, 'messages', path);
      const found: (CallbackEvent | null)[] = [];
      statuses.forEach((_, i) => found.push(statusEvent(objectAt(statuses, i, `${path}.statuses`), `${path}.statuses[${i}]`, now)));
      messages.forEach((_, i) => found.push(inboundEvent(objectAt(messages, i, `${path}.messages`), contacts, to, `${path}.messages[${i}]`, now)));
      for (const e of found) {
        if (!e) continue;
        const key = eventKey(e);
        if (seen.has(key)) continue;
        seen.add(key);
        events.push(e);
      }
    }
    return events;
  } catch (err) {
    if (err instanceof Malformed) return { error: err.message };
    throw err;
  }
}

function* changesOf(body: unknown, field: string): Generator<{ entryId: string | undefined; value: Obj; path: string }> {
  if (!isObj(body)) throw new Malformed('body is not a JSON object');
  if (body.object !== 'whatsapp_business_account') throw new Malformed(`object is ${JSON.stringify(body.object ?? null)}, not "whatsapp_business_account"`);
  if (!Array.isArray(body.entry)) throw new Malformed('entry is not an array');
  const entries = body.entry;
  for (let e = 0; e < entries.length; e++) {
    const entry = objectAt(entries, e, 'entry');
    const changes = arrayAt(entry, 'changes', `entry[${e}]`);
    for (let c = 0; c < changes.length; c++) {
      const path = `entry[${e}].changes[${c}]`;
      const change = objectAt(changes, c, `entry[${e}].changes`);
      if (change.field !== field) continue;
      if (!isObj(change.value)) throw new Malformed(`${path}.value is not an object`);
      yield { entryId: str(entry.id), value: change.value, path: `${path}.value` };
    }
  }
}

/** An `account_update` change (onboarding: `PARTNER_ADDED` after Embedded Signup, and others). */
export interface AccountUpdate {
  /** `entry[].id`. */
  entryId?: string;
  /** `PARTNER_ADDED`, `PARTNER_REMOVED`, `ACCOUNT_VIOLATION`, … */
  event: string;
  wabaId?: string;
  ownerBusinessId?: string;
}

/** The `account_update` changes of a webhook body; `{error}` as parseWebhook. */
export function parseAccountUpdates(body: unknown): AccountUpdate[] | { error: string } {
  try {
    const out: AccountUpdate[] = [];
    for (const { entryId, value, path } of changesOf(body, 'account_update')) {
      const update: AccountUpdate = { event: need(str(value.event), path, 'has no event') };
      if (entryId !== undefined) update.entryId = entryId;
      const info = isObj(value.waba_info) ? value.waba_info : undefined;
      const wabaId = str(info?.waba_id);
      const owner = str(info?.owner_business_id);
      if (wabaId !== undefined) update.wabaId = wabaId;
      if (owner !== undefined) update.ownerBusinessId = owner;
      out.push(update);
    }
    return out;
  } catch (err) {
    if (err instanceof Malformed) return { error: err.message };
    throw err;
  }
}
