/**
 * HTTP client for webhook delivery.
 *
 * - One undici Agent per client, keep-alive pooled (default 16 connections per origin).
 * - SSRF guard in two layers: the URL policy (checkCallbackUrl) before every send,
 *   which covers IP-literal hosts (net.connect skips DNS for those), and a
 *   connect-time DNS lookup that drops non-public answers, so a hostname that
 *   resolves to a private address is refused at the moment of connecting.
 * - Redirects are never followed: a 3xx is a failed delivery.
 * - The response body is read and discarded up to 64 KiB; past that the
 *   connection is destroyed rather than draining more.
 * - post() never throws, and never reports URL credentials in `error`.
 */
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { Agent, request } from 'undici';
import { checkCallbackUrl, isPublicAddress } from '../net/ssrf.js';

export interface WebhookPostResult {
  ok: boolean;
  status: number | null;
  /** ms to wait per Retry-After (seconds or HTTP date), when given */
  retryAfterMs?: number;
  error?: string;
}

export interface WebhookClientOptions {
  allowPrivate: boolean;
  /** Overall deadline per post (connect + headers + body), default 10 000 ms. */
  timeoutMs?: number;
  userAgent?: string;
  maxConnectionsPerOrigin?: number;
  /**
   * DNS lookup consulted at connect time before the address policy is applied
   * (default `dns.lookup`). Mainly a seam for tests / custom resolvers.
   */
  lookup?: LookupFunction;
}

export const DEFAULT_USER_AGENT = 'switchboard-webhook/1.0';
export const DEFAULT_TIMEOUT_MS = 10_000;
export const CONNECT_TIMEOUT_MS = 5_000;
export const MAX_RESPONSE_BODY_BYTES = 64 * 1024;
const DEFAULT_CONNECTIONS_PER_ORIGIN = 16;

/** Error code used when the connect-time lookup refuses every resolved address. */
export const SSRF_BLOCKED_CODE = 'ERR_WEBHOOK_ADDRESS_BLOCKED';

/** Headers the caller may not set: the client / undici own these. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection',
]);

function blockedError(hostname: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(
    `refused to connect: ${hostname} resolves only to non-public addresses`,
  );
  err.code = SSRF_BLOCKED_CODE;
  return err;
}

/**
 * Wraps a DNS lookup so only public addresses are handed to the socket.
 * Works for both `all: true` (used by Node's happy-eyeballs autoSelectFamily)
 * and single-address lookups.
 */
export function createGuardedLookup(base: LookupFunction = dns.lookup as LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    base(hostname, options, (err, address, family) => {
      if (err) {
        callback(err, address, family);
        return;
      }
      if (Array.isArray(address)) {
        const allowed = address.filter((a) => isPublicAddress(a.address));
        if (allowed.length === 0) {
          callback(blockedError(hostname), []);
          return;
        }
        callback(null, allowed);
        return;
      }
      if (typeof address !== 'string' || !isPublicAddress(address)) {
        callback(blockedError(hostname), '', family);
        return;
      }
      callback(null, address, family);
    });
  };
}

/** Retry-After: delta-seconds or HTTP-date → milliseconds from now (>= 0). */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined) return undefined;
  const s = v.trim();
  if (s === '') return undefined;
  if (/^\d+$/.test(s)) {
    const secs = Number(s);
    return Number.isSafeInteger(secs) ? secs * 1000 : undefined;
  }
  // HTTP-dates always contain a letter (weekday / month name); refuse bare
  // numbers like "1.5" or "-3" that Date.parse would happily accept.
  if (!/[a-z]/i.test(s)) return undefined;
  const at = Date.parse(s);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const e = err as NodeJS.ErrnoException & { errors?: unknown[] };
    // Happy-eyeballs connect failures come as AggregateError with an empty message.
    if (!e.message && Array.isArray(e.errors) && e.errors.length > 0) {
      return describeError(e.errors[0]);
    }
    if (e.message) return e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.message;
    return e.code ?? e.name;
  }
  return String(err);
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export class WebhookClient {
  private readonly agent: Agent;
  private readonly allowPrivate: boolean;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private closing: Promise<void> | null = null;

  constructor(opts: WebhookClientOptions) {
    this.allowPrivate = opts.allowPrivate;
    this.timeoutMs = opts.timeoutMs && opts.timeoutMs > 0 ? opts.timeoutMs : DEFAULT_TIMEOUT_MS;
    this.userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
    const baseLookup = opts.lookup ?? (dns.lookup as LookupFunction);
    this.agent = new Agent({
      connections: opts.maxConnectionsPerOrigin ?? DEFAULT_CONNECTIONS_PER_ORIGIN,
      pipelining: 1,
      keepAliveTimeout: 4_000,
      headersTimeout: DEFAULT_TIMEOUT_MS,
      bodyTimeout: DEFAULT_TIMEOUT_MS,
      connect: {
        timeout: CONNECT_TIMEOUT_MS,
        lookup: opts.allowPrivate ? baseLookup : createGuardedLookup(baseLookup),
      },
    });
  }

  async post(url: string, body: string, headers: Record<string, string> = {}): Promise<WebhookPostResult> {
    let secrets: string[] = [];
    const scrub = (msg: string): string => {
      let out = msg;
      for (const s of secrets) if (s) out = out.split(s).join('***');
      return out;
    };
    try {
      if (this.closing) return { ok: false, status: null, error: 'webhook client is closed' };

      const policy = checkCallbackUrl(url, this.allowPrivate);
      if (!policy.ok) return { ok: false, status: null, error: `callback URL refused: ${policy.reason}` };
      const target = policy.url;

      const reqHeaders: Record<string, string> = {
        'user-agent': this.userAgent,
        'content-type': 'application/json',
      };
      for (const [name, value] of Object.entries(headers)) {
        const key = name.toLowerCase();
        if (RESERVED_HEADERS.has(key)) continue;
        reqHeaders[key] = value;
      }
      if (target.username || target.password) {
        const user = safeDecode(target.username);
        const pass = safeDecode(target.password);
        const basic = Buffer.from(`${user}:${pass}`, 'utf8').toString('base64');
        secrets = [target.username, target.password, user, pass, basic].filter((s) => s.length >= 3);
        reqHeaders['authorization'] = `Basic ${basic}`;
        target.username = '';
        target.password = '';
      }

      const controller = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort(new Error(`timed out after ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      timer.unref?.();

      try {
        const res = await request(target, {
          method: 'POST',
          dispatcher: this.agent,
          headers: reqHeaders,
          body,
          signal: controller.signal,
          // The overall deadline above governs; these only back it up (and let a
          // timeoutMs above the 10 s agent default take effect).
          headersTimeout: this.timeoutMs + 1_000,
          bodyTimeout: this.timeoutMs + 1_000,
        });
        const status = res.statusCode;
        const retryAfterMs = parseRetryAfter(res.headers['retry-after']);

        // Read and discard up to 64 KiB; beyond that undici destroys the socket.
        try {
          await res.body.dump({ limit: MAX_RESPONSE_BODY_BYTES });
        } catch {
          // A body that fails or times out does not change the status verdict.
        }

        const result: WebhookPostResult = { ok: status >= 200 && status < 300, status };
        if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
        if (!result.ok) {
          result.error =
            status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
        }
        return result;
      } catch (err) {
        if (timedOut) return { ok: false, status: null, error: `timed out after ${this.timeoutMs} ms` };
        const code = (err as NodeJS.ErrnoException | null)?.code;
        if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
          return { ok: false, status: null, error: `timed out: ${scrub(describeError(err))}` };
        }
        return { ok: false, status: null, error: scrub(describeError(err)) };
      } finally {
        clearTimeout(timer);
      }
    } catch (err) {
      return { ok: false, status: null, error: scrub(describeError(err)) };
    }
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closing = this.agent.close().catch(() => undefined);
    }
    return this.closing;
  }
}
