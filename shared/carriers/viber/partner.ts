/**
 * A partner's dialect of Viber business messages: DecisionTelecom's flat JSON API (channels.md
 * 2.3, docs/viber.md "Partner dialect"). Basic auth with the account's API key; errors as
 * `{name, message, code, status}` bodies (the SDK also reads that body on a 2xx answer, so we do);
 * status changes POSTed to the `callback_url` sent with each message.
 *
 * Message types: 206 (two-way text) or 208 (two-way text + image + button, sent without an image)
 * so the person can answer; the partner has no tracking data, so replies name our message by its
 * `message_id` at most, and receipts by `message_id` only.
 */
import type { CallbackEvent, SendOutcome } from '../http-carrier.js';
import { PARTNER_STATUSES, httpErrorOutcome, partnerInfo, unreadableAnswer } from './status-codes.js';
import {
  ViberInputError, callbackItems, clampSeconds, eventTime, fieldPath, idText, isObject,
  type ViberAdapter, type ViberHttpRequest, type ViberSendInput,
} from './types.js';

export const PARTNER_DEFAULT_BASE_URL = 'https://web.it-decision.com';
export const PARTNER_SEND_PATH = '/v1/api/send-viber';
export const PARTNER_STATUS_PATH = '/v1/api/receive-viber';

export const PARTNER_TTL_MIN = 40;
export const PARTNER_TTL_MAX = 21_600;
/** `source_addr` limit. */
export const PARTNER_SOURCE_MAX = 20;

export const PARTNER_TYPE = { text: 206, textButton: 208 } as const;
/** source_type values. */
export const PARTNER_SOURCE_TYPE = { promotional: 1, transactional: 2 } as const;

export function partnerTtl(seconds: number): number {
  return clampSeconds(seconds, PARTNER_TTL_MIN, PARTNER_TTL_MAX);
}

function authHeaders(credentials: ViberSendInput['credentials']): Record<string, string> {
  const key = credentials?.apiKey;
  if (typeof key !== 'string' || key.length === 0) throw new ViberInputError('partner dialect: the connection has no credentials.apiKey');
  // The partner's access key is sent whole as the Basic credential (its SDKs do the same).
  return { authorization: `Basic ${Buffer.from(key, 'utf8').toString('base64')}` };
}

export function buildPartnerSend(input: ViberSendInput): ViberHttpRequest {
  const source = String(input.sender);
  if (source.length === 0 || source.length > PARTNER_SOURCE_MAX) {
    throw new ViberInputError(`partner dialect: sender must be a source name of 1 to ${PARTNER_SOURCE_MAX} characters, got ${JSON.stringify(source)}`);
  }
  const json: Record<string, unknown> = {
    source_addr: source,
    destination_addr: input.to,
    message_type: input.button ? PARTNER_TYPE.textButton : PARTNER_TYPE.text,
    text: input.text,
  };
  if (input.button) {
    json.button_caption = input.button.title;
    json.button_action = input.button.url;
  }
  json.source_type = input.promotional ? PARTNER_SOURCE_TYPE.promotional : PARTNER_SOURCE_TYPE.transactional;
  if (input.callbackUrl) json.callback_url = input.callbackUrl;
  json.validity_period = partnerTtl(input.ttlSeconds);
  return { method: 'POST', path: PARTNER_SEND_PATH, headers: authHeaders(input.credentials), json };
}

/** A partner error body: `{name, message, code, status}` (an HTTP error may carry only name and status). */
function errorBody(body: unknown): { name: string; status: number | undefined } | null {
  if (!isObject(body) || typeof body.name !== 'string' || !('status' in body)) return null;
  const status = typeof body.status === 'number' && Number.isInteger(body.status) ? body.status : undefined;
  // The name says what went wrong, the field included ("Invalid Parameter: source_addr").
  return { name: body.name, status };
}

function retryAfterMs(headers: Record<string, string | string[] | undefined> | undefined): number | undefined {
  const raw = headers?.['retry-after'];
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, 3600) * 1000;
  const date = Date.parse(v);
  return Number.isFinite(date) ? Math.min(Math.max(0, date - Date.now()), 3_600_000) : undefined;
}

export function parsePartnerSendResponse(
  status: number,
  body: unknown,
  headers?: Record<string, string | string[] | undefined>,
): SendOutcome {
  const err = errorBody(body);
  const ok = status >= 200 && status <= 299;
  if (err || !ok) {
    // The body's status names the error when it is one; a 2xx without one is an error too.
    const code = err?.status !== undefined && err.status >= 400 && err.status <= 599 ? err.status : ok ? 400 : status;
    return httpErrorOutcome(code, err?.name, code === 429 ? retryAfterMs(headers) : undefined);
  }
  if (!isObject(body)) return unreadableAnswer(status, 'not a JSON object');
  const id = idText(body.message_id);
  if (id === null) return unreadableAnswer(status, 'no message_id');
  return { kind: 'accepted', carrierRef: id };
}

/** A status poll of one message (`receive-viber`); the answer is read with `parsePartnerStatus`. */
export function buildPartnerStatusQuery(messageId: string, credentials: ViberSendInput['credentials']): ViberHttpRequest {
  const id = /^\d{1,15}$/.test(messageId) ? Number(messageId) : messageId;
  return { method: 'POST', path: PARTNER_STATUS_PATH, headers: authHeaders(credentials), json: { message_id: id } };
}

/** One status object (`{message_id, status}`, a poll answer or a callback) → receipt, null (no news), or error. */
function statusEvent(item: Record<string, unknown>, path: (f: string) => string, now: number): CallbackEvent | null | { error: string } {
  const carrierRef = idText(item.message_id);
  if (carrierRef === null) return { error: `${path('message_id')}: missing or not an id` };
  const code = item.status;
  const entry = typeof code === 'number' ? PARTNER_STATUSES[code] : undefined;
  if (typeof code !== 'number' || !entry) return { error: `${path('status')}: unknown value ${JSON.stringify(code)}` };
  const at = eventTime(item.timestamp, now);
  if (at === null) return { error: `${path('timestamp')}: must be unix milliseconds` };
  if (entry.receipt === null) return null;
  if (entry.receipt === 'sent' || entry.receipt === 'delivered') return { kind: 'receipt', carrierRef, status: entry.receipt, at };
  return { kind: 'receipt', carrierRef, status: entry.receipt, code, info: partnerInfo(code), at };
}

/** A `receive-viber` answer: the receipt, null when the status says nothing new (pending, unknown), or the error outcome. */
export function parsePartnerStatus(status: number, body: unknown, now: number = Date.now()): CallbackEvent | null | { error: string } {
  if (status < 200 || status > 299 || errorBody(body)) return { error: `status poll answered HTTP ${status}` };
  if (!isObject(body)) return { error: 'body: must be a JSON object' };
  return statusEvent(body, (f) => f, now);
}

/**
 * Events of one callback body (one object or an array): status changes `{message_id, status}`
 * and replies `{message_id, source_addr, destination_addr, text, reply_to?}` (docs/viber.md).
 * Pending (5) and Unknown (20) make no event.
 */
export function parsePartnerCallback(body: unknown, now: number = Date.now()): CallbackEvent[] | { error: string } {
  const items = callbackItems(body);
  if (!Array.isArray(items)) return items;
  const events: CallbackEvent[] = [];
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const path = (field: string) => fieldPath(body, i, field);
    if (!isObject(item)) return { error: `[${i}]: must be an object` };
    if (!('text' in item)) {
      const event = statusEvent(item, path, now);
      if (event === null) continue;
      if ('error' in event) return event;
      events.push(event);
      continue;
    }
    if (typeof item.text !== 'string') return { error: `${path('text')}: must be a string` };
    const carrierRef = idText(item.message_id);
    if (carrierRef === null) return { error: `${path('message_id')}: missing or not an id` };
    const from = idText(item.source_addr);
    if (from === null || !/^\d{1,20}$/.test(from)) return { error: `${path('source_addr')}: must be digits` };
    const to = item.destination_addr;
    if (typeof to !== 'string' || to.length === 0) return { error: `${path('destination_addr')}: must be a string` };
    const at = eventTime(item.timestamp, now);
    if (at === null) return { error: `${path('timestamp')}: must be unix milliseconds` };
    const inbound: CallbackEvent = { kind: 'inbound', from, to, text: item.text, at, carrierRef };
    if (item.reply_to !== undefined && item.reply_to !== null) {
      const replyTo = idText(item.reply_to);
      if (replyTo === null) return { error: `${path('reply_to')}: not an id` };
      inbound.replyToCarrierRef = replyTo;
    }
    events.push(inbound);
  }
  return events;
}

export const partnerAdapter: ViberAdapter = {
  dialect: 'partner',
  buildSend: buildPartnerSend,
  parseSendResponse: parsePartnerSendResponse,
  parseCallback: parsePartnerCallback,
  clampTtl: partnerTtl,
};
