/**
 * A Viber simulator for tests, benchmarks and local development (`scripts/sim/viber/cli.ts` is its
 * CLI; docs/viber.md "Simulator"). One HTTP server on 127.0.0.1 speaks both dialects:
 *
 * - official: `POST /vibersrvc/1/send_message`, HTTP 200 always, `{status, seq, message_token}`;
 *   checks the caller's address (status 11), the service id (2), `dest` (27), `label` (18), `ttl`
 *   (20), text (3), type (5), button and tracking data (6), and answers 12 for a repeated `seq`.
 * - partner: `POST /v1/api/send-viber` and `POST /v1/api/receive-viber` with Basic auth (401) and
 *   `{name, message, code, status}` error bodies (400, 402, 429, 500).
 *
 * Outcomes follow the recipient's last two digits (outcomes.ts). Callbacks are built from the
 * adapters' fixtures (shared/carriers/viber/fixtures), so they have exactly the shape our
 * adapters parse, and go to the configured callback URL (official; partner replies) or the
 * message's `callback_url` (partner statuses).
 *
 * Control: `POST /_sim/inbound`, `POST /_sim/subscription`, `GET /_sim/messages?to=&limit=`
 * (newest first), `GET /_sim/callbacks?limit=`, `GET /_sim/stats`, `POST /_sim/config`,
 * `POST /_sim/reset`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CALLBACK_SECRET_HEADER, sourceAllowed } from '../../../shared/carriers/viber/callback-auth.js';
import {
  OFFICIAL_BUTTON_TYPES, OFFICIAL_NO_TRACKING_TYPES, OFFICIAL_SEND_PATH, OFFICIAL_TRACKING_TYPES, OFFICIAL_TTL_MAX, OFFICIAL_TTL_MIN,
} from '../../../shared/carriers/viber/official.js';
import {
  PARTNER_SEND_PATH, PARTNER_SOURCE_MAX, PARTNER_STATUS_PATH, PARTNER_TTL_MAX, PARTNER_TTL_MIN,
} from '../../../shared/carriers/viber/partner.js';
import { VIBER_BUTTON_TITLE_MAX, VIBER_TEXT_MAX } from '../../../shared/carriers/viber/types.js';
import officialDelivered from '../../../shared/carriers/viber/fixtures/official-delivered.json' with { type: 'json' };
import officialMessage from '../../../shared/carriers/viber/fixtures/official-message.json' with { type: 'json' };
import officialSubscribed from '../../../shared/carriers/viber/fixtures/official-subscribed.json' with { type: 'json' };
import partnerReply from '../../../shared/carriers/viber/fixtures/partner-reply.json' with { type: 'json' };
import partnerStatus from '../../../shared/carriers/viber/fixtures/partner-status.json' with { type: 'json' };
import { CallbackDispatcher, type CallbackStats, type CallbackTarget, type EmittedCallback } from './callbacks.js';
import { officialScript, partnerScript, type OfficialReceipt, type PartnerError, type SimTiming } from './outcomes.js';

export const SIM_HOST = '127.0.0.1';
export const SIM_DEFAULT_SERVICE_ID = 1001;
export const SIM_DEFAULT_API_KEY = 'sim-key';

export type SimDialect = 'official' | 'partner';

export interface ViberSimulatorOptions {
  /** 0 (default) = any free port. */
  port?: number;
  /** Which dialects are served; default both. */
  dialects?: readonly SimDialect[];
  /** Official: known service ids (default [1001]); others answer status 2. */
  serviceIds?: readonly number[];
  /** Official: caller addresses and CIDR ranges allowed (default loopback); others answer status 11. */
  allowedCallers?: readonly string[];
  /** Partner: accepted API keys (default ['sim-key']); others answer 401. */
  apiKeys?: readonly string[];
  /** Partner: accepted source names (default any). */
  sources?: readonly string[];
  /** Where callbacks go: every official one; partner ones only when no `callback_url` came with the message (or, for replies, from the source). */
  callbackUrl?: string;
  /** Appended to `callbackUrl` as its last path segment (the connection's callback token). */
  callbackToken?: string;
  /** Sent as the `x-callback-secret` header of every callback when set. */
  sharedSecret?: string;
  /** First callback after this (default 20 ms); later ones of a message at 1.5x and 2x. */
  callbackDelayMs?: number;
  /** Suffix 01 expires after the ttl or this, whichever is first (default 1000 ms). */
  expireAfterMs?: number;
  /** Send every receipt twice (the copy a little later, in another POST). */
  duplicateCallbacks?: boolean;
  /** Send a message's receipts in reverse order (seen before delivered). */
  reorderCallbacks?: boolean;
  /** Official events per POST (default 100: a JSON array; 1: one object per POST). */
  callbackBatch?: number;
  /** Partner events per POST (default 1: one object per POST). */
  partnerCallbackBatch?: number;
  /** Extra tries of a callback answered non-2xx or not at all (default 3, 100 ms doubling). */
  callbackRetries?: number;
  callbackRetryDelayMs?: number;
  /** Callback POSTs in flight at most (default 32). */
  callbackConcurrency?: number;
  callbackTimeoutMs?: number;
  /** Messages kept for inspection (default 100 000; the oldest are dropped). */
  maxRecords?: number;
  /** Callback time granularity (default 5 ms): events due in the same tick share POSTs. */
  tickMs?: number;
}

/** What the simulator took (or refused) at its send endpoints. */
export interface SimMessage {
  dialect: SimDialect;
  /** message_token (official) or message_id (partner) as text; '' when refused. */
  id: string;
  /** Service id (official) or source name (partner). */
  sender: string;
  to: string;
  type: number | null;
  /** Official label, or partner `promotion`/`transaction` from source_type. */
  label: string | null;
  text: string | null;
  button: { caption: string; action: string } | null;
  trackingData: string | null;
  /** Seconds (official ttl, partner validity_period) as sent, or the default when absent. */
  ttl: number | null;
  seq: number | null;
  callbackUrl: string | null;
  /** Official: the answer's status. Partner: the HTTP status of the answer. */
  result: number;
  /** Partner: the message's current status code (0 Sent, 1 Delivered, …). */
  partnerStatus: number | null;
  at: number;
}

export interface OfficialInbound {
  service_id: number;
  from: string;
  text: string;
  tracking_data?: string;
}

export interface PartnerInbound {
  source_addr: string;
  from: string;
  text: string;
  /** The message_id of our message this answers. */
  reply_to?: string | number;
}

export interface SimStats {
  official: { requests: number; accepted: number; refused: number };
  partner: { requests: number; accepted: number; refused: number };
  callbacks: CallbackStats & { pending: number; dropped: number };
}

/** Options that can change while running (`configure`, `POST /_sim/config`). */
export type SimRuntimeOptions = Pick<ViberSimulatorOptions,
  'callbackUrl' | 'callbackToken' | 'sharedSecret' | 'callbackDelayMs' | 'expireAfterMs' | 'duplicateCallbacks'
  | 'reorderCallbacks' | 'callbackBatch' | 'partnerCallbackBatch'>;

export interface ViberSimulator {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Newest first; `to` filters by recipient. */
  messages(filter?: { to?: string; limit?: number }): SimMessage[];
  /** A person's reply (official: by service id; partner: by source name), sent as a callback. Returns the inbound's id. */
  inject(input: OfficialInbound | PartnerInbound): { id: string };
  /** Official subscribe / unsubscribe event (our adapter ignores them). */
  subscription(input: { service_id: number; from: string; subscribed: boolean }): void;
  /** The last callback POSTs, newest first. */
  callbacks(limit?: number): EmittedCallback[];
  stats(): SimStats;
  configure(patch: SimRuntimeOptions): void;
  /** Forget messages, scheduled callbacks and counters (options stay). */
  reset(): void;
  /** Resolves when no callback is scheduled, in flight or waiting for a retry. */
  idle(): Promise<void>;
}

export class SimInputError extends Error {}

const officialReceiptBody = fixtureBuilder(officialDelivered, ['event', 'message_token', 'service_id', 'phone_number', 'tracking_data', 'device', 'timestamp']);
const officialMessageBody = fixtureBuilder(officialMessage, ['message_token', 'service_id', 'phone_number', 'message.text', 'message.tracking_data', 'timestamp']);
const officialSubscribedBody = fixtureBuilder(officialSubscribed, ['event', 'service_id', 'phone_number', 'timestamp']);
const partnerStatusBody = fixtureBuilder(partnerStatus, ['message_id', 'status', 'timestamp']);
const partnerReplyBody = fixtureBuilder(partnerReply, ['message_id', 'source_addr', 'destination_addr', 'text', 'reply_to', 'timestamp']);

const MAX_BODY = 64 * 1024;
const LOOPBACK = ['127.0.0.0/8', '::1'];
const OFFICIAL_DEFAULT_TTL = OFFICIAL_TTL_MAX;
const PARTNER_DEFAULT_VALIDITY = PARTNER_TTL_MAX;
const PARTNER_TYPES = new Set([106, 108, 206, 208, 225]);
const PARTNER_BUTTON_TYPES = new Set([108, 208]);
const OFFICIAL_KNOWN_TYPES = new Set([...OFFICIAL_TRACKING_TYPES, ...OFFICIAL_NO_TRACKING_TYPES, ...OFFICIAL_BUTTON_TYPES, 1701, 1702]);
const OFFICIAL_TEXT_TYPES = new Set([6, 106, 206, 225, 306, 8, 9, 108, 109, 208, 209, 210]);

/**
 * Callback bodies from a fixture: `fields` are the fixture keys the simulator fills (`a.b` for a
 * nested key). A field the fixture lacks fails at start: the simulator must not drift from the
 * shape the adapters parse. Built in the fixture's key order; an undefined value drops the key.
 */
export function fixtureBuilder<F extends string>(fixture: Record<string, unknown>, fields: readonly F[]): (values: Record<F, unknown>) => Record<string, unknown> {
  for (const f of fields) {
    const [head, inner] = f.split('.') as [string, string | undefined];
    const parent = inner === undefined ? fixture : fixture[head];
    if (!isObj(parent) || !((inner ?? head) in parent)) throw new Error(`fixture has no field ${f}`);
  }
  const build = (template: Record<string, unknown>, prefix: string, values: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(template)) {
      const path = prefix + key;
      const t = template[key];
      const v = path in values ? values[path] : isObj(t) ? build(t, `${path}.`, values) : t;
      if (v !== undefined) out[key] = v;
    }
    return out;
  };
  return (values) => build(fixture, '', values);
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function intIn(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: http.IncomingMessage): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? null : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function parseJson(text: string | null): unknown {
  if (text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export async function startViberSimulator(options: ViberSimulatorOptions = {}): Promise<ViberSimulator> {
  const dialects = new Set(options.dialects ?? ['official', 'partner']);
  const serviceIds = new Set(options.serviceIds ?? [SIM_DEFAULT_SERVICE_ID]);
  const allowedCallers = options.allowedCallers ?? LOOPBACK;
  const authHeaders = new Set((options.apiKeys ?? [SIM_DEFAULT_API_KEY]).map((k) => `Basic ${Buffer.from(k, 'utf8').toString('base64')}`));
  const sources = options.sources ? new Set(options.sources) : null;
  const maxRecords = options.maxRecords ?? 100_000;
  const rt: Required<Omit<SimRuntimeOptions, 'callbackUrl' | 'callbackToken' | 'sharedSecret'>> & SimRuntimeOptions = {
    callbackUrl: options.callbackUrl,
    callbackToken: options.callbackToken,
    sharedSecret: options.sharedSecret,
    callbackDelayMs: options.callbackDelayMs ?? 20,
    expireAfterMs: options.expireAfterMs ?? 1000,
    duplicateCallbacks: options.duplicateCallbacks ?? false,
    reorderCallbacks: options.reorderCallbacks ?? false,
    callbackBatch: options.callbackBatch ?? 100,
    partnerCallbackBatch: options.partnerCallbackBatch ?? 1,
  };
  const dispatcher = new CallbackDispatcher({
    tickMs: options.tickMs ?? 5,
    retries: options.callbackRetries ?? 3,
    retryDelayMs: options.callbackRetryDelayMs ?? 100,
    concurrency: options.callbackConcurrency ?? 32,
    timeoutMs: options.callbackTimeoutMs ?? 5000,
    keepEmitted: 1000,
  });

  let records: SimMessage[] = [];
  const byPartnerId = new Map<string, SimMessage>();
  /** Official `service_id:seq` → message_token of accepted sends (answers 12 on a repeat). */
  const seqs = new Map<string, string>();
  /** Partner source name → the last callback_url given with it (where its replies go). */
  const partnerUrls = new Map<string, string>();
  let nextToken = 4_000_000_000_000_000;
  let nextPartnerId = 100_000;
  let dropped = 0;
  const counters = {
    official: { requests: 0, accepted: 0, refused: 0 },
    partner: { requests: 0, accepted: 0, refused: 0 },
  };

  function remember(m: SimMessage): void {
    records.push(m);
    if (m.dialect === 'partner' && m.id !== '') byPartnerId.set(m.id, m);
    if (records.length > maxRecords * 1.25) {
      const gone = records.slice(0, records.length - maxRecords);
      records = records.slice(-maxRecords);
      for (const g of gone) if (g.dialect === 'partner') byPartnerId.delete(g.id);
    }
    if (seqs.size > maxRecords) {
      // Maps iterate in insertion order: drop the oldest quarter.
      let n = seqs.size / 4;
      for (const k of seqs.keys()) {
        if (n-- <= 0) break;
        seqs.delete(k);
      }
    }
  }

  /** One target object per URL and batch size, so the dispatcher groups by identity; rebuilt when the config changes. */
  let targets = new Map<string, CallbackTarget>();

  function target(url: string, batch: number): CallbackTarget {
    const key = `${batch} ${url}`;
    let t = targets.get(key);
    if (!t) {
      if (targets.size >= 1000) targets = new Map();
      t = { url, headers: rt.sharedSecret ? { [CALLBACK_SECRET_HEADER]: rt.sharedSecret } : {}, batch };
      targets.set(key, t);
    }
    return t;
  }

  function configuredTarget(batch: number): CallbackTarget | null {
    if (!rt.callbackUrl) return null;
    const cached = targets.get(`${batch} configured`);
    if (cached) return cached;
    const url = new URL(rt.callbackUrl);
    if (rt.callbackToken) url.pathname = `${url.pathname.replace(/\/$/, '')}/${encodeURIComponent(rt.callbackToken)}`;
    const t = target(url.toString(), batch);
    targets.set(`${batch} configured`, t);
    return t;
  }

  function emit(target: CallbackTarget | null, afterMs: number, body: Record<string, unknown>, onSend?: () => void, duplicate = false): void {
    if (!target) {
      dropped++;
      if (onSend) dispatcher.schedule(afterMs, null, body, onSend);
      return;
    }
    dispatcher.schedule(afterMs, target, body, onSend);
    if (duplicate && rt.duplicateCallbacks) dispatcher.schedule(afterMs + Math.max(rt.callbackDelayMs / 2, 10), target, body);
  }

  function timing(): SimTiming {
    return { callbackDelayMs: rt.callbackDelayMs, expireAfterMs: rt.expireAfterMs };
  }

  /** Receipt times in reverse order when reordering is on. */
  function ordered<T extends { afterMs: number }>(items: T[]): T[] {
    if (!rt.reorderCallbacks || items.length < 2) return items;
    const times = items.map((i) => i.afterMs);
    return items.map((item, k) => ({ ...item, afterMs: times[items.length - 1 - k]! }));
  }

  // ---------------------------------------------------------------------------- official

  function officialSend(raw: string | null, remote: string): Record<string, unknown> {
    counters.official.requests++;
    const body = parseJson(raw);
    const seq = isObj(body) && typeof body.seq === 'number' ? body.seq : null;
    const refuse = (status: number, record?: SimMessage): Record<string, unknown> => {
      counters.official.refused++;
      if (record) remember({ ...record, result: status });
      return { status, seq };
    };
    if (!sourceAllowed(remote, allowedCallers)) return refuse(11);
    if (!isObj(body)) return refuse(3);
    const message = isObj(body.message) ? body.message : null;
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    const rec: SimMessage = {
      dialect: 'official',
      id: '',
      sender: String(body.service_id ?? ''),
      to: str(body.dest) ?? '',
      type: typeof body.type === 'number' ? body.type : null,
      label: str(body.label),
      text: str(message?.['#txt']),
      button: message && ('#caption' in message || '#action' in message)
        ? { caption: String(message['#caption'] ?? ''), action: String(message['#action'] ?? '') } : null,
      trackingData: message ? str(message['#tracking_data']) : null,
      ttl: body.ttl === undefined ? OFFICIAL_DEFAULT_TTL : typeof body.ttl === 'number' ? body.ttl : null,
      seq,
      callbackUrl: null,
      result: 0,
      partnerStatus: null,
      at: Date.now(),
    };
    if (seq === null || !Number.isSafeInteger(seq)) return refuse(6, rec);
    if (!intIn(body.service_id, 1, Number.MAX_SAFE_INTEGER) || !serviceIds.has(body.service_id)) return refuse(2, rec);
    if (typeof body.dest !== 'string' || !/^\d{7,15}$/.test(body.dest)) return refuse(27, rec);
    if (body.label !== 'transaction' && body.label !== 'promotion') return refuse(18, rec);
    if (body.ttl !== undefined && !intIn(body.ttl, OFFICIAL_TTL_MIN, OFFICIAL_TTL_MAX)) return refuse(20, rec);
    const type = body.type;
    if (typeof type !== 'number' || !OFFICIAL_KNOWN_TYPES.has(type)) return refuse(5, rec);
    if (!message) return refuse(6, rec);
    if (OFFICIAL_TEXT_TYPES.has(type)) {
      const txt = message['#txt'];
      if (typeof txt !== 'string' || txt.length === 0) return refuse(6, rec);
      if (txt.length > VIBER_TEXT_MAX) return refuse(3, rec);
    }
    if (OFFICIAL_BUTTON_TYPES.has(type)) {
      const caption = message['#caption'];
      const action = message['#action'];
      if (typeof caption !== 'string' || caption.length === 0 || typeof action !== 'string' || action.length === 0) return refuse(6, rec);
      if ([...caption].length > VIBER_BUTTON_TITLE_MAX) return refuse(3, rec);
    }
    const tracking = message['#tracking_data'];
    if (OFFICIAL_TRACKING_TYPES.has(type) && typeof tracking !== 'string') return refuse(6, rec);
    if (OFFICIAL_NO_TRACKING_TYPES.has(type) && tracking !== undefined) return refuse(6, rec);

    const seqKey = `${body.service_id}:${seq}`;
    const earlier = seqs.get(seqKey);
    if (earlier !== undefined) {
      counters.official.accepted++;
      return { status: 12, seq, message_token: Number(earlier) };
    }
    const ttl = (body.ttl as number | undefined) ?? OFFICIAL_DEFAULT_TTL;
    const script = officialScript(body.dest, ttl, timing());
    if (script.status !== 0) return refuse(script.status, rec);

    const token = nextToken++;
    rec.id = String(token);
    seqs.set(seqKey, rec.id);
    counters.official.accepted++;
    remember(rec);
    const to = configuredTarget(rt.callbackBatch);
    for (const r of ordered(script.receipts)) emitOfficialReceipt(to, r.afterMs, r.event, rec, r.device);
    return { status: 0, seq, message_token: token };
  }

  function emitOfficialReceipt(target: CallbackTarget | null, afterMs: number, event: OfficialReceipt, rec: SimMessage, device: string | undefined): void {
    const body = officialReceiptBody({
      event,
      message_token: Number(rec.id),
      service_id: Number(rec.sender),
      phone_number: rec.to,
      tracking_data: rec.trackingData ?? undefined,
      device,
      timestamp: Date.now() + afterMs,
    });
    emit(target, afterMs, body, undefined, true);
  }

  // ---------------------------------------------------------------------------- partner

  function partnerError(res: http.ServerResponse, e: PartnerError): void {
    json(res, e.httpStatus, { name: e.name, message: e.message, code: e.code, status: e.httpStatus });
  }

  function invalidParameter(field: string): PartnerError {
    return { httpStatus: 400, name: `Invalid Parameter: ${field}`, message: 'Empty parameter or parameter validation error', code: 1 };
  }

  function partnerAuthorized(req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const auth = req.headers.authorization;
    if (auth !== undefined && authHeaders.has(auth)) return true;
    json(res, 401, { name: 'Unauthorized', status: 401 });
    return false;
  }

  function partnerSend(raw: string | null): PartnerError | { message_id: number } {
    counters.partner.requests++;
    const body = parseJson(raw);
    const refuse = (e: PartnerError, record?: SimMessage): PartnerError => {
      counters.partner.refused++;
      if (record) remember({ ...record, result: e.httpStatus });
      return e;
    };
    if (!isObj(body)) return refuse(invalidParameter('body'));
    const str = (v: unknown) => (typeof v === 'string' ? v : null);
    const dest = typeof body.destination_addr === 'number' ? String(body.destination_addr) : str(body.destination_addr);
    const rec: SimMessage = {
      dialect: 'partner',
      id: '',
      sender: String(body.source_addr ?? ''),
      to: dest ?? '',
      type: typeof body.message_type === 'number' ? body.message_type : null,
      label: body.source_type === 1 ? 'promotion' : body.source_type === 2 ? 'transaction' : null,
      text: str(body.text),
      button: 'button_caption' in body || 'button_action' in body
        ? { caption: String(body.button_caption ?? ''), action: String(body.button_action ?? '') } : null,
      trackingData: null,
      ttl: body.validity_period === undefined ? PARTNER_DEFAULT_VALIDITY : typeof body.validity_period === 'number' ? body.validity_period : null,
      seq: null,
      callbackUrl: str(body.callback_url),
      result: 200,
      partnerStatus: null,
      at: Date.now(),
    };
    const source = body.source_addr;
    if (typeof source !== 'string' || source.length === 0 || source.length > PARTNER_SOURCE_MAX || (sources && !sources.has(source))) {
      return refuse(invalidParameter('source_addr'), rec);
    }
    if (dest === null || !/^\d{7,15}$/.test(dest)) return refuse(invalidParameter('destination_addr'), rec);
    const type = body.message_type;
    if (typeof type !== 'number' || !PARTNER_TYPES.has(type)) return refuse(invalidParameter('message_type'), rec);
    if (typeof body.text !== 'string' || body.text.length === 0 || body.text.length > VIBER_TEXT_MAX) return refuse(invalidParameter('text'), rec);
    if (PARTNER_BUTTON_TYPES.has(type)) {
      const caption = body.button_caption;
      if (typeof caption !== 'string' || caption.length === 0 || [...caption].length > VIBER_BUTTON_TITLE_MAX) return refuse(invalidParameter('button_caption'), rec);
      if (typeof body.button_action !== 'string' || !/^https?:\/\//.test(body.button_action)) return refuse(invalidParameter('button_action'), rec);
    }
    if (body.source_type !== 1 && body.source_type !== 2) return refuse(invalidParameter('source_type'), rec);
    if (body.validity_period !== undefined && !intIn(body.validity_period, PARTNER_TTL_MIN, PARTNER_TTL_MAX)) return refuse(invalidParameter('validity_period'), rec);
    if (body.callback_url !== undefined) {
      let ok = false;
      try {
        ok = typeof body.callback_url === 'string' && /^https?:$/.test(new URL(body.callback_url).protocol);
      } catch {
        ok = false;
      }
      if (!ok) return refuse(invalidParameter('callback_url'), rec);
    }
    const script = partnerScript(dest, rec.ttl ?? PARTNER_DEFAULT_VALIDITY, timing());
    if (script.error) return refuse(script.error, rec);

    const id = nextPartnerId++;
    rec.id = String(id);
    rec.partnerStatus = 0;
    counters.partner.accepted++;
    remember(rec);
    if (rec.callbackUrl) partnerUrls.set(source, rec.callbackUrl);
    const to = rec.callbackUrl ? target(rec.callbackUrl, rt.partnerCallbackBatch) : configuredTarget(rt.partnerCallbackBatch);
    for (const s of ordered(script.statuses)) {
      const cb = partnerStatusBody({ message_id: id, status: s.status, timestamp: Date.now() + s.afterMs });
      emit(to, s.afterMs, cb, () => {
        rec.partnerStatus = s.status;
      }, true);
    }
    return { message_id: id };
  }

  function partnerPoll(raw: string | null): PartnerError | { message_id: number; status: number } {
    const body = parseJson(raw);
    const id = isObj(body) ? body.message_id : undefined;
    const rec = typeof id === 'number' || typeof id === 'string' ? byPartnerId.get(String(id)) : undefined;
    if (!rec || rec.partnerStatus === null) return invalidParameter('message_id');
    return { message_id: Number(rec.id), status: rec.partnerStatus };
  }

  // ---------------------------------------------------------------------------- control

  function inject(input: OfficialInbound | PartnerInbound): { id: string } {
    if (typeof input.from !== 'string' || !/^\d{7,15}$/.test(input.from)) throw new SimInputError('from: must be 7 to 15 digits');
    if (typeof input.text !== 'string' || input.text.length === 0) throw new SimInputError('text: must be a non-empty string');
    if ('service_id' in input) {
      if (!dialects.has('official')) throw new SimInputError('service_id: the official dialect is not served');
      if (!Number.isSafeInteger(input.service_id)) throw new SimInputError('service_id: must be an integer');
      if (!serviceIds.has(input.service_id)) throw new SimInputError(`service_id: unknown service ${input.service_id}`);
      if (input.tracking_data !== undefined && typeof input.tracking_data !== 'string') throw new SimInputError('tracking_data: must be a string');
      const token = nextToken++;
      const body = officialMessageBody({
        message_token: token,
        service_id: input.service_id,
        phone_number: input.from,
        'message.text': input.text,
        'message.tracking_data': input.tracking_data,
        timestamp: Date.now(),
      });
      emit(configuredTarget(rt.callbackBatch), 0, body);
      return { id: String(token) };
    }
    if (!dialects.has('partner')) throw new SimInputError('source_addr: the partner dialect is not served');
    if (typeof input.source_addr !== 'string' || input.source_addr.length === 0) throw new SimInputError('source_addr: must be a string (or give service_id)');
    // The callback_url this source last sent with is its connection's; the configured URL may be another connection's.
    const known = partnerUrls.get(input.source_addr);
    const to = known ? target(known, rt.partnerCallbackBatch) : configuredTarget(rt.partnerCallbackBatch);
    if (!to) throw new SimInputError('no callback URL: send a message with callback_url from this source first, or configure one');
    if (input.reply_to !== undefined && !/^\d+$/.test(String(input.reply_to))) throw new SimInputError('reply_to: must be a message_id');
    const id = nextPartnerId++;
    const body = partnerReplyBody({
      message_id: id,
      source_addr: input.from,
      destination_addr: input.source_addr,
      text: input.text,
      reply_to: input.reply_to === undefined ? undefined : Number(input.reply_to),
      timestamp: Date.now(),
    });
    emit(to, 0, body);
    return { id: String(id) };
  }

  function subscription(input: { service_id: number; from: string; subscribed: boolean }): void {
    if (!serviceIds.has(input.service_id)) throw new SimInputError(`service_id: unknown service ${input.service_id}`);
    if (typeof input.from !== 'string' || !/^\d{7,15}$/.test(input.from)) throw new SimInputError('from: must be 7 to 15 digits');
    const body = officialSubscribedBody({
      event: input.subscribed ? 'subscribed' : 'unsubscribed',
      service_id: input.service_id,
      phone_number: input.from,
      timestamp: Date.now(),
    });
    emit(configuredTarget(rt.callbackBatch), 0, body);
  }

  function messages(filter: { to?: string; limit?: number } = {}): SimMessage[] {
    const limit = Math.max(1, Math.min(filter.limit ?? 100, maxRecords));
    const out: SimMessage[] = [];
    for (let i = records.length - 1; i >= 0 && out.length < limit; i--) {
      const m = records[i]!;
      if (filter.to === undefined || m.to === filter.to) out.push(m);
    }
    return out;
  }

  function configure(patch: SimRuntimeOptions): void {
    const p = patch as Record<string, unknown>;
    for (const key of ['callbackUrl', 'callbackToken', 'sharedSecret'] as const) {
      if (key in p) {
        const v = p[key];
        if (v !== undefined && v !== null && typeof v !== 'string') throw new SimInputError(`${key}: must be a string`);
        if (key === 'callbackUrl' && typeof v === 'string') {
          try {
            new URL(v);
          } catch {
            throw new SimInputError('callbackUrl: not a URL');
          }
        }
        rt[key] = typeof v === 'string' && v !== '' ? v : undefined;
        targets = new Map();
      }
    }
    for (const [key, max] of [['callbackDelayMs', 3_600_000], ['expireAfterMs', 3_600_000], ['callbackBatch', 1000], ['partnerCallbackBatch', 1000]] as const) {
      if (key in p) {
        const v = p[key];
        const min = key.endsWith('Batch') ? 1 : 0;
        if (!intIn(v, min, max)) throw new SimInputError(`${key}: must be an integer ${min}..${max}`);
        rt[key] = v;
      }
    }
    for (const key of ['duplicateCallbacks', 'reorderCallbacks'] as const) {
      if (key in p) {
        if (typeof p[key] !== 'boolean') throw new SimInputError(`${key}: must be true or false`);
        rt[key] = p[key];
      }
    }
  }

  function stats(): SimStats {
    return {
      official: { ...counters.official },
      partner: { ...counters.partner },
      callbacks: { ...dispatcher.stats, pending: dispatcher.pending, dropped },
    };
  }

  function reset(): void {
    dispatcher.clear();
    records = [];
    byPartnerId.clear();
    seqs.clear();
    partnerUrls.clear();
    dropped = 0;
    for (const c of [counters.official, counters.partner]) Object.assign(c, { requests: 0, accepted: 0, refused: 0 });
  }

  // ---------------------------------------------------------------------------- HTTP

  async function control(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    const route = `${req.method ?? 'GET'} ${url.pathname}`;
    if (route === 'GET /_sim/messages') {
      const limit = url.searchParams.has('limit') ? Number(url.searchParams.get('limit')) : 100;
      if (!Number.isInteger(limit) || limit < 1) return json(res, 400, { error: 'limit: must be a positive integer' });
      const to = url.searchParams.get('to') ?? undefined;
      return json(res, 200, { messages: messages({ to, limit }) });
    }
    if (route === 'GET /_sim/callbacks') {
      const limit = Number(url.searchParams.get('limit') ?? 100);
      return json(res, 200, { callbacks: dispatcher.recent(Number.isInteger(limit) && limit > 0 ? limit : 100) });
    }
    if (route === 'GET /_sim/stats') return json(res, 200, stats());
    if (req.method !== 'POST') return json(res, 404, { error: `no route ${route}` });
    const body = parseJson(await readBody(req));
    if (!isObj(body)) return json(res, 400, { error: 'body: must be a JSON object' });
    try {
      switch (url.pathname) {
        case '/_sim/inbound':
          return json(res, 200, inject(body as unknown as OfficialInbound | PartnerInbound));
        case '/_sim/subscription':
          subscription({ service_id: body.service_id as number, from: body.from as string, subscribed: body.subscribed !== false });
          return json(res, 200, { ok: true });
        case '/_sim/config':
          configure(body as SimRuntimeOptions);
          return json(res, 200, { ok: true });
        case '/_sim/reset':
          reset();
          return json(res, 200, { ok: true });
        default:
          return json(res, 404, { error: `no route ${route}` });
      }
    } catch (err) {
      if (err instanceof SimInputError) return json(res, 400, { error: err.message });
      throw err;
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = req.url ?? '/';
    const q = raw.indexOf('?');
    const path = q === -1 ? raw : raw.slice(0, q);
    if (path.startsWith('/_sim/')) return control(req, res, new URL(raw, `http://${SIM_HOST}`));
    if (req.method !== 'POST') return json(res, 405, { error: 'POST only' });
    if (path === OFFICIAL_SEND_PATH && dialects.has('official')) {
      const body = await readBody(req);
      return json(res, 200, officialSend(body, req.socket.remoteAddress ?? ''));
    }
    if ((path === PARTNER_SEND_PATH || path === PARTNER_STATUS_PATH) && dialects.has('partner')) {
      if (!partnerAuthorized(req, res)) {
        req.resume();
        if (path === PARTNER_SEND_PATH) {
          counters.partner.requests++;
          counters.partner.refused++;
        }
        return;
      }
      const body = await readBody(req);
      const answer = path === PARTNER_SEND_PATH ? partnerSend(body) : partnerPoll(body);
      if ('httpStatus' in answer) return partnerError(res, answer);
      return json(res, 200, answer);
    }
    return json(res, 404, { error: `no route ${path}` });
  }

  const server = http.createServer((req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 500, { error: err instanceof Error ? err.message : String(err) });
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (sock) => sock.on('error', () => undefined));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, SIM_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://${SIM_HOST}:${port}`,
    port,
    async stop() {
      await dispatcher.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    messages,
    inject,
    subscription,
    callbacks: (limit = 100) => dispatcher.recent(limit),
    stats,
    configure,
    reset,
    idle: () => dispatcher.idle(),
  };
}
