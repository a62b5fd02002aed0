/**
 * The official Viber Business Messages dialect (partner-facing API, channels.md 2.2): the
 * `send_message` request, its answer, and the callbacks our connection accepts (docs/viber.md,
 * "Official dialect"). No auth in the request: Viber allowlists the caller's address per service.
 *
 * Message types: every type we send carries `#tracking_data` (our per-recipient reference), so a
 * reply names the exact message it answers and receipts map back without a lookup:
 * - text: 206 (transactional) or 225 (promotional);
 * - text + button: 209. Viber has no transactional text-and-button type and 109 (its other
 *   all-devices one) refuses tracking data, so a message with a button goes as 209 with the
 *   `promotion` label whatever the step says.
 */
import type { CallbackEvent, ReceiptStatus, SendOutcome } from '../http-carrier.js';
import { httpErrorOutcome, officialOutcome, unreadableAnswer } from './status-codes.js';
import {
  ViberInputError, callbackItems, clampSeconds, eventTime, fieldPath, idText, isObject,
  type ViberAdapter, type ViberHttpRequest, type ViberSendInput,
} from './types.js';

export const OFFICIAL_DEFAULT_BASE_URL = 'https://services.viber.com';
export const OFFICIAL_SEND_PATH = '/vibersrvc/1/send_message';

export const OFFICIAL_TTL_MIN = 30;
export const OFFICIAL_TTL_MAX = 1_209_600;

export const OFFICIAL_TYPE = {
  textTransactional: 206,
  textPromotional: 225,
  textButton: 209,
} as const;

/** Types that require `#tracking_data` (status 6 without it), per the public connector's list. */
export const OFFICIAL_TRACKING_TYPES: ReadonlySet<number> = new Set([206, 207, 208, 209, 210, 220, 225, 306, 307, 230, 231, 232, 233, 801, 802, 901]);
/** Types that refuse `#tracking_data` (status 6 with it). */
export const OFFICIAL_NO_TRACKING_TYPES: ReadonlySet<number> = new Set([6, 7, 8, 9, 106, 107, 108, 109, 222]);
/** Types that show a button (`#caption` + `#action`). */
export const OFFICIAL_BUTTON_TYPES: ReadonlySet<number> = new Set([8, 9, 108, 109, 208, 209, 210]);

export function officialTtl(seconds: number): number {
  return clampSeconds(seconds, OFFICIAL_TTL_MIN, OFFICIAL_TTL_MAX);
}

// A fresh process starts above every seq an earlier one used (one per microsecond of uptime would
// be needed to catch up), so Viber never takes a new message for a repeat of an old one.
let nextSeq = Date.now() * 1000;

function serviceId(sender: number | string): number {
  const n = typeof sender === 'number' ? sender : /^\d{1,15}$/.test(sender) ? Number(sender) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) throw new ViberInputError(`official dialect: sender must be a service id (a positive integer), got ${JSON.stringify(sender)}`);
  return n;
}

export function buildOfficialSend(input: ViberSendInput): ViberHttpRequest {
  const service = serviceId(input.sender);
  const seq = input.seq !== undefined && Number.isSafeInteger(input.seq) && input.seq >= 0 ? input.seq : nextSeq++;
  const button = input.button;
  const message: Record<string, unknown> = { '#txt': input.text };
  if (button) {
    message['#caption'] = button.title;
    message['#action'] = button.url;
  }
  message['#tracking_data'] = input.ourRef;
  const type = button ? OFFICIAL_TYPE.textButton : input.promotional ? OFFICIAL_TYPE.textPromotional : OFFICIAL_TYPE.textTransactional;
  return {
    method: 'POST',
    path: OFFICIAL_SEND_PATH,
    headers: {},
    json: {
      service_id: service,
      dest: input.to,
      seq,
      type,
      label: button || input.promotional ? 'promotion' : 'transaction',
      ttl: officialTtl(input.ttlSeconds),
      message,
    },
  };
}

/** `send_message` answers HTTP 200 with `{status, seq, message_token}`; anything else came from a proxy or an outage. */
export function parseOfficialSendResponse(status: number, body: unknown): SendOutcome {
  if (status < 200 || status > 299) return httpErrorOutcome(status, undefined);
  if (!isObject(body)) return unreadableAnswer(status, 'not a JSON object');
  const code = body.status;
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 0) return unreadableAnswer(status, 'no integer status');
  return officialOutcome(code, idText(body.message_token) ?? undefined);
}

const RECEIPTS: Readonly<Record<string, ReceiptStatus>> = { delivered: 'delivered', seen: 'seen', expired: 'expired' };

/**
 * Events of one callback body: one event object or an array of them (docs/viber.md). Receipts
 * (`delivered`, `seen`, `expired`) and replies (`message`) become events; `subscribed` and
 * `unsubscribed` are ignored. A delivered receipt arrives once per device: repeats inside one body
 * are dropped here (first wins), repeats across bodies are no-ops in the engine.
 */
export function parseOfficialCallback(body: unknown, now: number = Date.now()): CallbackEvent[] | { error: string } {
  const items = callbackItems(body);
  if (!Array.isArray(items)) return items;
  const events: CallbackEvent[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const path = (field: string) => fieldPath(body, i, field);
    if (!isObject(item)) return { error: `[${i}]: must be an object` };
    const event = item.event;
    if (typeof event !== 'string') return { error: `${path('event')}: missing` };
    const at = eventTime(item.timestamp, now);
    if (at === null) return { error: `${path('timestamp')}: must be unix milliseconds` };
    const receipt = RECEIPTS[event];
    if (receipt) {
      const carrierRef = idText(item.message_token);
      if (carrierRef === null) return { error: `${path('message_token')}: missing or not an id` };
      const ourRef = item.tracking_data;
      if (ourRef !== undefined && typeof ourRef !== 'string') return { error: `${path('tracking_data')}: must be a string` };
      if (item.device !== undefined && typeof item.device !== 'string') return { error: `${path('device')}: must be a string` };
      const key = `${receipt}:${carrierRef}`;
      if (seen.has(key)) continue;
      seen.add(key);
      events.push(ourRef === undefined || ourRef === ''
        ? { kind: 'receipt', carrierRef, status: receipt, at }
        : { kind: 'receipt', carrierRef, ourRef, status: receipt, at });
      continue;
    }
    if (event === 'message') {
      const carrierRef = idText(item.message_token);
      if (carrierRef === null) return { error: `${path('message_token')}: missing or not an id` };
      const to = idText(item.service_id);
      if (to === null) return { error: `${path('service_id')}: missing or not an id` };
      const from = idText(item.phone_number);
      if (from === null || !/^\d{1,20}$/.test(from)) return { error: `${path('phone_number')}: must be digits` };
      const message = item.message;
      if (!isObject(message)) return { error: `${path('message')}: must be an object` };
      if (typeof message.text !== 'string') return { error: `${path('message.text')}: must be a string` };
      const tracking = message.tracking_data;
      if (tracking !== undefined && tracking !== null && typeof tracking !== 'string') return { error: `${path('message.tracking_data')}: must be a string` };
      const inbound: CallbackEvent = { kind: 'inbound', from, to, text: message.text, at, carrierRef };
      if (typeof tracking === 'string' && tracking !== '') inbound.replyToOurRef = tracking;
      events.push(inbound);
      continue;
    }
    if (event === 'subscribed' || event === 'unsubscribed') continue;
    return { error: `${path('event')}: unknown value ${JSON.stringify(event.slice(0, 40))}` };
  }
  return events;
}

export const officialAdapter: ViberAdapter = {
  dialect: 'official',
  buildSend: buildOfficialSend,
  parseSendResponse: parseOfficialSendResponse,
  parseCallback: parseOfficialCallback,
  clampTtl: officialTtl,
};
