/**
 * A keep-alive JSON client for one HTTP carrier base URL (WhatsApp Graph, Viber). The base URL is
 * an operator's configuration, so there is no SSRF guard here (that is for customers' callback
 * URLs, shared/webhooks/http.ts). It never throws for an HTTP status: callers classify the answer
 * by the carrier's own codes. It throws `CarrierHttpError` for network failures and timeouts,
 * which callers treat as retryable. Credentials travel only in headers and are never logged here.
 */
import { Pool } from 'undici';
import { SUBMIT_SAMPLE_EVERY, observeSubmit } from '../metrics.js';

export interface CarrierHttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON, or the text when the body is not JSON, or null when empty. */
  body: unknown;
}

export class CarrierHttpError extends Error {
  override name = 'CarrierHttpError';
  constructor(message: string, readonly code: string | undefined) {
    super(message);
  }
}

export interface CarrierHttpOptions {
  /** Connections kept open to the origin (default 32). */
  connections?: number;
  /** Deadline per request, connect to last body byte (default 10 000 ms). */
  timeoutMs?: number;
  /** Bytes of response body read at most (default 1 MiB). */
  maxBodyBytes?: number;
  /**
   * Labels of the submit-latency histogram: the carrier kind and the connection's name, as SMPP's
   * and every other metric's (default, for clients outside a connection: kind `http`, connection
   * the base URL's host).
   */
  metrics?: { kind: string; connection: string };
}

export class CarrierHttpClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly labels: { kind: string; connection: string };
  private posts = 0;

  constructor(baseUrl: string, opts: CarrierHttpOptions = {}) {
    const url = new URL(baseUrl);
    this.labels = opts.metrics ?? { kind: 'http', connection: url.host };
    this.basePath = url.pathname.replace(/\/$/, '');
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;
    this.pool = new Pool(url.origin, {
      connections: opts.connections ?? 32,
      keepAliveTimeout: 30_000,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      connectTimeout: Math.min(5_000, this.timeoutMs),
    });
  }

  /** `path` is appended to the base URL's path; `query` values are encoded here. */
  async request(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    opts: { query?: Record<string, string>; headers?: Record<string, string>; json?: unknown } = {},
  ): Promise<CarrierHttpResponse> {
    const search = opts.query ? `?${new URLSearchParams(opts.query).toString()}` : '';
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    let body: string | undefined;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] = 'application/json';
    }
    // One POST (a send) in SUBMIT_SAMPLE_EVERY is timed for the carrier submit-latency histogram.
    const timed = method === 'POST' && this.posts++ % SUBMIT_SAMPLE_EVERY === 0 ? performance.now() : 0;
    try {
      const res = await this.pool.request({
        method, path: `${this.basePath}${path}${search}`, headers, body, signal: AbortSignal.timeout(this.timeoutMs),
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > this.maxBodyBytes) {
          res.body.destroy();
          throw new CarrierHttpError(`response body over ${this.maxBodyBytes} bytes`, 'BODY_TOO_LARGE');
        }
        chunks.push(chunk as Buffer);
      }
      const text = Buffer.concat(chunks).toString('utf8');
      let parsed: unknown = null;
      if (text.length > 0) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      if (timed !== 0) observeSubmit(this.labels.kind, this.labels.connection, (performance.now() - timed) / 1000);
      return { status: res.statusCode, headers: res.headers, body: parsed };
    } catch (err) {
      if (err instanceof CarrierHttpError) throw err;
      const e = err as NodeJS.ErrnoException;
      const code = e.name === 'TimeoutError' || e.name === 'AbortError' ? 'TIMEOUT' : e.code;
      throw new CarrierHttpError(code === 'TIMEOUT' ? `no answer within ${this.timeoutMs} ms` : e.message, code);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
