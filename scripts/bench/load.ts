/**
 * Load generation: keep-alive HTTP (one undici Pool per target, as many connections as workers),
 * bounded concurrency, latency percentiles.
 */
import { Pool } from 'undici';

export interface HttpAnswer {
  status: number;
  text: string;
  ms: number;
}

export class Client {
  readonly pool: Pool;

  constructor(
    readonly origin: string,
    connections: number,
    private readonly defaultHeaders: Record<string, string> = {},
  ) {
    this.pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000 });
  }

  async request(method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
    const started = performance.now();
    const res = await this.pool.request({
      method,
      path,
      headers: { ...this.defaultHeaders, ...(body !== undefined && { 'content-type': 'application/json' }), ...headers },
      ...(body !== undefined && { body }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, text, ms: performance.now() - started };
  }

  async json<T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PATCH' | 'PUT', path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
    const res = await this.request(method, path, body === undefined ? undefined : JSON.stringify(body), headers);
    let parsed: unknown = res.text;
    try {
      parsed = JSON.parse(res.text);
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed as T };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * Requests spread over several origins (the copies of the web process), one after the other in
 * turn, as a round-robin load balancer would; one origin is a plain Client.
 */
export class SpreadClient {
  private readonly clients: Client[];
  private next = 0;

  constructor(origins: readonly string[], connections: number, defaultHeaders: Record<string, string> = {}) {
    if (origins.length === 0) {
      throw new Error('SpreadClient: no origin');
    }
    this.clients = origins.map((o) => new Client(o, connections, defaultHeaders));
  }

  request(method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', path: string, body?: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
    const client = this.clients[this.next++ % this.clients.length]!;
    return client.request(method, path, body, headers);
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.close()));
  }
}

/** Runs `task(i)` for i = 0… with at most `concurrency` in flight, until `count` tasks ran or `until` (epoch ms) passed. */
export async function runBounded(concurrency: number, count: number, until: number, task: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next < count && Date.now() < until) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  return next;
}

export interface Percentiles {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function percentiles(values: number[]): Percentiles {
  if (values.length === 0) {
    return { n: 0, p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  }
  const sorted = Float64Array.from(values).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
  const r = (x: number) => Math.round(x * 10) / 10;
  return {
    n: values.length,
    p50: r(at(0.5)),
    p90: r(at(0.9)),
    p99: r(at(0.99)),
    max: r(sorted[sorted.length - 1]!),
    mean: r(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
