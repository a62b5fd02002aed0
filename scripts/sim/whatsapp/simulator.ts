/**
 * A local stand-in for Meta's WhatsApp Cloud API (Graph) for tests, benchmarks and development
 * (channels.md 3.1). Started in-process with `startWhatsappSimulator()` on 127.0.0.1, or as a CLI
 * (`npm run sim:whatsapp`). The Graph endpoints live in graph-api.ts, webhook delivery in
 * emitter.ts, the outcome table in outcomes.ts, the seed in seed.ts.
 *
 * Control endpoints (JSON; the simulator's own, under `/_sim/`):
 *   POST /_sim/inbound  {phone_number_id, from?, text, context_id?, user_id?, omit_from?, type?}  → {id}
 *   GET  /_sim/messages?to=&limit=   sends answered, newest first          → {messages}
 *   POST /_sim/reset                 back to the seed, schedule emptied     → {ok}
 *   GET  /_sim/sends                 accepted sends per number (with `countSends`): how many numbers,
 *                                    how many sends, the numbers sent more than once → {counting, destinations, sends, repeated, repeatedCount, truncated}
 *   POST /_sim/sends/reset           those counts back to zero              → {ok}
 *   GET|POST /_sim/codes?waba_id=    a fresh single-use signup code (what FB.login gives the page, so API
 *                                    tests can skip the browser) → {code, waba_id, phone_number_id, business_id, used, issued_at}
 *   GET  /_sim/codes?list=1          the codes issued, newest first         → {codes}
 *   POST /_sim/verify {callback_url?, verify_token?}  Meta's GET handshake  → {ok} or 502 {ok: false, error}
 *   GET  /_sim/state                 knobs and webhook counters             → {knobs, webhooks}
 *   POST /_sim/config {callback_url?, callback_delay_ms?, duplicate_statuses?, out_of_order?,
 *        bad_signature?, window_error_sync?, enforce_window?, window_ms?}  → {knobs}
 *   GET  /_sim/webhooks?limit=       recent webhook POST attempts           → {deliveries}
 *   GET  /_sim/sdk.js?cancel=&waba_id=  the Embedded Signup stand-in (sdk.ts)
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebhookEmitter, type Delivery, type EmitterOptions, type EmitterStats } from './emitter.js';
import { GraphApi, unknownPath, type GraphReply, type SimKnobs } from './graph-api.js';
import { sdkScript } from './sdk.js';
import { DEFAULT_SEED, checkSeed, type WhatsappSeed } from './seed.js';
import { SimState, type SignupCode, type SimMessage } from './state.js';

export type { SimKnobs } from './graph-api.js';
export type { SignupCode, SimMessage } from './state.js';
export type { Delivery, EmitterStats } from './emitter.js';

export const SIM_HOST = '127.0.0.1';

export interface WhatsappSimulatorOptions extends Partial<SimKnobs> {
  /** 0 (default): any free port. */
  port?: number;
  seed?: WhatsappSeed;
  /** Perform the GET handshake against `callbackUrl` before resolving (default true); a failure rejects the start. */
  verifyOnStart?: boolean;
  /** Sends kept for `/_sim/messages` (default 100 000). */
  maxMessages?: number;
  /** Count accepted sends per number for `/_sim/sends` (default false: a map entry per number sent to). */
  countSends?: boolean;
  /** Webhook batching, bounds, retries (emitter.ts). */
  webhooks?: Omit<EmitterOptions, 'appSecret'>;
}

/** An inbound message a person sends to one of the seeded numbers. */
export interface SimInbound {
  phoneNumberId: string;
  /** The person's number (digits); needed unless `userId` is given. */
  from?: string;
  text: string;
  /** The wamid the person replied to (`context.id`). */
  contextId?: string;
  /** The person's BSUID (`from_user_id`, contacts' `user_id`). */
  userId?: string;
  /** Leave `from` and `wa_id` out of the webhook (a username-only user); the window still counts `from`. */
  omitFrom?: boolean;
  /** `text` (default), `button` (a template quick-reply tap) or `interactive` (a reply button). */
  type?: 'text' | 'button' | 'interactive';
  /** Profile name (default "Sim User"). */
  name?: string;
}

export interface WhatsappSimulator {
  readonly url: string;
  readonly port: number;
  readonly seed: WhatsappSeed;
  stop(): Promise<void>;
  /** Sends answered (also refused ones), newest first. */
  messages(query?: { to?: string; limit?: number }): SimMessage[];
  /** Sends an inbound message webhook now and opens the 24-hour window for that person. */
  inject(inbound: SimInbound): { id: string };
  /** A fresh single-use signup code (what FB.login gives the page). */
  issueCode(wabaId?: string): SignupCode;
  codes(): SignupCode[];
  /** Meta's GET handshake against the callback URL (default the configured one). */
  verify(callbackUrl?: string, verifyToken?: string): Promise<void>;
  configure(knobs: Partial<SimKnobs>): SimKnobs;
  knobs(): SimKnobs;
  /** Back to the seed: sends, windows, codes, minted tokens, subscriptions, registrations, scheduled webhooks. Knobs stay. */
  reset(): void;
  stats(): EmitterStats;
  /** Recent webhook POST attempts, newest first. */
  webhooks(limit?: number): Delivery[];
  /** Resolves once every scheduled webhook has been sent (or given up). */
  idle(timeoutMs?: number): Promise<void>;
}

const MAX_BODY = 1024 * 1024;
const KNOB_DEFAULTS: SimKnobs = {
  callbackUrl: '', callbackDelayMs: 10, duplicateStatuses: false, outOfOrder: false, badSignature: false,
  windowErrorSync: false, enforceWindow: true, windowMs: 24 * 3600 * 1000,
};

class BadRequest extends Error {}

/** The raw body (Graph bodies can be JSON or form fields, so not control-http's readJson), up to 1 MiB. */
function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new BadRequest('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A JSON object or form fields; undefined for an empty body; BadRequest for anything else. */
function parseBody(raw: Buffer, contentType: string | undefined): Record<string, unknown> | undefined {
  if (raw.length === 0) return undefined;
  const text = raw.toString('utf8');
  if ((contentType ?? '').includes('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadRequest('the body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BadRequest('the body must be a JSON object');
  return parsed as Record<string, unknown>;
}

function reply(res: http.ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text), ...extra });
  res.end(text);
}

function optString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new BadRequest(`${key} must be a string`);
  return v;
}

function optBool(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new BadRequest(`${key} must be true or false`);
  return v;
}

function optInt(body: Record<string, unknown>, key: string, max: number): number | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max) throw new BadRequest(`${key} must be an integer 0..${max}`);
  return v;
}

function checkUrl(url: string, what: string): void {
  if (url === '') return;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new BadRequest(`${what} is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new BadRequest(`${what} must be http(s)`);
}

export async function startWhatsappSimulator(opts: WhatsappSimulatorOptions = {}): Promise<WhatsappSimulator> {
  const seed = opts.seed ?? DEFAULT_SEED;
  const problems = checkSeed(seed);
  if (problems.length > 0) throw new Error(`WhatsApp simulator seed: ${problems.join('; ')}`);
  const knobs: SimKnobs = { ...KNOB_DEFAULTS };
  for (const k of Object.keys(KNOB_DEFAULTS) as (keyof SimKnobs)[]) {
    if (opts[k] !== undefined) (knobs as unknown as Record<string, unknown>)[k] = opts[k];
  }
  checkUrl(knobs.callbackUrl, 'callbackUrl');
  const state = new SimState(seed, opts.maxMessages ?? 100_000, opts.countSends === true);
  const emitter = new WebhookEmitter({ ...opts.webhooks, appSecret: seed.app.secret });
  emitter.badSignature = knobs.badSignature;
  const verify = async (url?: string, token?: string): Promise<void> => {
    const target = url ?? knobs.callbackUrl;
    if (!target) throw new Error('no callback URL to verify');
    await emitter.handshake(target, token ?? seed.app.verify_token);
  };
  const graph = new GraphApi(state, knobs, emitter, verify);

  const configure = (change: Partial<SimKnobs>): SimKnobs => {
    if (change.callbackUrl !== undefined) checkUrl(change.callbackUrl, 'callbackUrl');
    for (const [k, v] of Object.entries(change)) {
      if (v !== undefined && k in KNOB_DEFAULTS) (knobs as unknown as Record<string, unknown>)[k] = v;
    }
    emitter.badSignature = knobs.badSignature;
    return { ...knobs };
  };

  const inject = (m: SimInbound): { id: string } => {
    const number = state.numbers.get(m.phoneNumberId);
    if (!number) throw new BadRequest(`phone_number_id ${m.phoneNumberId} is not a seeded number`);
    if (m.from !== undefined && !/^\d{6,20}$/.test(m.from)) throw new BadRequest('from must be 6-20 digits');
    if (m.from === undefined && !m.userId) throw new BadRequest('from or user_id is required');
    if (typeof m.text !== 'string' || m.text === '') throw new BadRequest('text is required');
    const now = Date.now();
    const id = graph.wamid(m.from ?? m.userId ?? '');
    const message: Record<string, unknown> = {};
    const sendFrom = m.from !== undefined && !m.omitFrom;
    if (sendFrom) message.from = m.from;
    if (m.userId) message.from_user_id = m.userId;
    Object.assign(message, { id, timestamp: String(Math.floor(now / 1000)) });
    if (m.contextId) message.context = { from: number.seed.display_phone_number.replace(/\D/g, ''), id: m.contextId };
    switch (m.type ?? 'text') {
      case 'text':
        Object.assign(message, { type: 'text', text: { body: m.text } });
        break;
      case 'button':
        Object.assign(message, { type: 'button', button: { payload: m.text, text: m.text } });
        break;
      case 'interactive':
        Object.assign(message, { type: 'interactive', interactive: { type: 'button_reply', button_reply: { id: 'sim-reply-1', title: m.text } } });
        break;
      default:
        throw new BadRequest('type must be text, button or interactive');
    }
    const contact: Record<string, unknown> = { profile: { name: m.name ?? 'Sim User' } };
    if (sendFrom) contact.wa_id = m.from;
    if (m.userId) contact.user_id = m.userId;
    if (m.from !== undefined) state.noteInbound(m.phoneNumberId, m.from, now);
    if (m.userId) state.noteInbound(m.phoneNumberId, m.userId, now);
    const url = graph.callbackUrl(number.seed.waba_id);
    if (url) {
      emitter.schedule(now, url, {
        field: 'messages', wabaId: number.seed.waba_id, phoneNumberId: number.seed.id,
        displayPhoneNumber: number.seed.display_phone_number, message, contact,
      });
    }
    return { id };
  };

  const control = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL, raw: Buffer, selfUrl: string): Promise<void> => {
    const cors = { 'access-control-allow-origin': '*' };
    const route = `${req.method} ${url.pathname}`;
    const body = (): Record<string, unknown> => parseBody(raw, req.headers['content-type']) ?? {};
    switch (route) {
      case 'POST /_sim/inbound': {
        const b = body();
        const phoneNumberId = optString(b, 'phone_number_id');
        const text = optString(b, 'text');
        if (!phoneNumberId) throw new BadRequest('phone_number_id is required');
        if (!text) throw new BadRequest('text is required');
        const m: SimInbound = { phoneNumberId, text };
        const from = optString(b, 'from');
        const contextId = optString(b, 'context_id');
        const userId = optString(b, 'user_id');
        const omitFrom = optBool(b, 'omit_from');
        const type = optString(b, 'type');
        const name = optString(b, 'name');
        if (from !== undefined) m.from = from;
        if (contextId !== undefined) m.contextId = contextId;
        if (userId !== undefined) m.userId = userId;
        if (omitFrom !== undefined) m.omitFrom = omitFrom;
        if (type !== undefined) m.type = type as SimInbound['type'];
        if (name !== undefined) m.name = name;
        return reply(res, 200, inject(m));
      }
      case 'GET /_sim/messages': {
        const limit = Number(url.searchParams.get('limit') ?? 100);
        if (!Number.isInteger(limit) || limit < 1 || limit > 100_000) throw new BadRequest('limit must be an integer 1..100000');
        return reply(res, 200, { messages: state.messages(url.searchParams.get('to') ?? undefined, limit) });
      }
      case 'POST /_sim/reset':
        sim.reset();
        return reply(res, 200, { ok: true });
      case 'GET /_sim/sends':
        return reply(res, 200, state.sendCounts());
      case 'POST /_sim/sends/reset':
        state.resetSendCounts();
        return reply(res, 200, { ok: true });
      case 'GET /_sim/codes':
      case 'POST /_sim/codes': {
        if (url.searchParams.get('list') === '1') return reply(res, 200, { codes: sim.codes() }, cors);
        const wabaId = url.searchParams.get('waba_id') ?? (req.method === 'POST' ? optString(body(), 'waba_id') : undefined);
        if (wabaId && !state.wabas.has(wabaId)) throw new BadRequest(`waba_id ${wabaId} is not a seeded WABA`);
        return reply(res, 200, state.issueCode(wabaId || undefined), cors);
      }
      case 'POST /_sim/verify': {
        const b = body();
        const target = optString(b, 'callback_url');
        if (target !== undefined) checkUrl(target, 'callback_url');
        try {
          await verify(target, optString(b, 'verify_token'));
          return reply(res, 200, { ok: true });
        } catch (err) {
          return reply(res, 502, { ok: false, error: err instanceof Error ? err.message : String(err) });
        }
      }
      case 'GET /_sim/state':
        return reply(res, 200, { knobs, webhooks: emitter.stats() });
      case 'POST /_sim/config': {
        const b = body();
        const change: Partial<SimKnobs> = {};
        const set = <K extends keyof SimKnobs>(k: K, v: SimKnobs[K] | undefined): void => {
          if (v !== undefined) change[k] = v;
        };
        const callbackUrl = optString(b, 'callback_url');
        if (callbackUrl !== undefined) checkUrl(callbackUrl, 'callback_url');
        set('callbackUrl', callbackUrl);
        set('callbackDelayMs', optInt(b, 'callback_delay_ms', 3_600_000));
        set('duplicateStatuses', optBool(b, 'duplicate_statuses'));
        set('outOfOrder', optBool(b, 'out_of_order'));
        set('badSignature', optBool(b, 'bad_signature'));
        set('windowErrorSync', optBool(b, 'window_error_sync'));
        set('enforceWindow', optBool(b, 'enforce_window'));
        set('windowMs', optInt(b, 'window_ms', 30 * 24 * 3600 * 1000));
        return reply(res, 200, { knobs: configure(change) });
      }
      case 'GET /_sim/webhooks': {
        const limit = Number(url.searchParams.get('limit') ?? 50);
        if (!Number.isInteger(limit) || limit < 1) throw new BadRequest('limit must be a positive integer');
        return reply(res, 200, { deliveries: emitter.deliveries(limit) });
      }
      case 'GET /_sim/sdk.js': {
        const js = sdkScript(selfUrl, url.searchParams);
        res.writeHead(200, { 'content-type': 'application/javascript; charset=utf-8', 'content-length': Buffer.byteLength(js), 'cache-control': 'no-store', ...cors });
        res.end(js);
        return;
      }
      default:
        if (req.method === 'OPTIONS') {
          res.writeHead(204, { ...cors, 'access-control-allow-methods': 'GET, POST', 'access-control-allow-headers': 'content-type' });
          res.end();
          return;
        }
        return reply(res, 404, { error: `no such control endpoint: ${route}` });
    }
  };

  const sendGraph = (res: http.ServerResponse, r: GraphReply): void => {
    const extra: Record<string, string> = r.status === 401 ? { 'www-authenticate': 'OAuth "Facebook Platform" "invalid_token" "Invalid OAuth access token"' } : {};
    reply(res, r.status, r.body, extra);
  };

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const selfUrl = `http://${req.headers.host ?? `${SIM_HOST}:${port}`}`;
    const url = new URL(req.url ?? '/', selfUrl);
    try {
      const raw = await readBody(req);
      if (url.pathname.startsWith('/_sim/')) {
        await control(req, res, url, raw, selfUrl);
        return;
      }
      const m = /^\/(v[^/]*)(\/.*)?$/.exec(url.pathname);
      if (!m) return sendGraph(res, unknownPath('(#100) Unknown path components: the path must start with a Graph version such as /v25.0'));
      if (!/^v\d+\.0$/.test(m[1]!)) return sendGraph(res, unknownPath(`(#100) Unknown Graph API version ${m[1]!}`));
      let body: Record<string, unknown> | undefined;
      try {
        body = parseBody(raw, req.headers['content-type']);
      } catch (err) {
        return sendGraph(res, unknownPath(`(#100) ${(err as Error).message}`));
      }
      const segments = (m[2] ?? '').split('/').filter((s) => s !== '').map((s) => decodeURIComponent(s));
      sendGraph(res, await graph.handle({
        method: req.method ?? 'GET', segments, query: url.searchParams, authorization: req.headers.authorization, body, selfUrl, version: m[1]!,
      }));
    } catch (err) {
      if (res.headersSent) return;
      if (err instanceof BadRequest || err instanceof URIError) reply(res, 400, { error: err.message });
      else reply(res, 500, { error: err instanceof Error ? err.message : String(err) });
    }
  };

  const server = http.createServer((req, res) => {
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    void handle(req, res);
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (sock) => sock.on('error', () => undefined));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, SIM_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  const sim: WhatsappSimulator = {
    url: `http://${SIM_HOST}:${port}`,
    port,
    seed,
    async stop() {
      await emitter.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    messages: (q = {}) => state.messages(q.to, q.limit ?? 100),
    inject,
    issueCode: (wabaId) => state.issueCode(wabaId),
    codes: () => [...state.codes.values()].reverse(),
    verify,
    configure,
    knobs: () => ({ ...knobs }),
    reset() {
      state.reset();
      emitter.clear();
    },
    stats: () => emitter.stats(),
    webhooks: (limit) => emitter.deliveries(limit),
    idle: (timeoutMs) => emitter.idle(timeoutMs),
  };

  if (knobs.callbackUrl && opts.verifyOnStart !== false) {
    try {
      await verify();
    } catch (err) {
      await sim.stop();
      throw err;
    }
  }
  return sim;
}
