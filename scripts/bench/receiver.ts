/**
 * Webhook receivers for the benchmark: HTTP servers on 127.0.0.1 that answer 200 (optionally
 * after a delay, the "slow receiver"), parse each POSTed JSON array and remember, per event key
 * (the recipient's phone number or the event's message_id), the `result` of every event in
 * arrival order. Counting happens in the harness process: no database reads while measuring.
 * A receiver given a `QueryEvent` also takes one event per GET request from its query (Kannel's
 * delivery-report callbacks, scripts/bench/kannel.ts).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type EventKey = (event: Record<string, unknown>) => string | null;

export const byPhone: EventKey = (e) => {
  const to = e.to as { phone_number?: unknown } | undefined;
  return typeof to?.phone_number === 'string' ? to.phone_number : null;
};
export const byMessageId: EventKey = (e) => (typeof e.message_id === 'string' ? e.message_id : null);

/**
 * An event carried in a GET request's query instead of a POSTed JSON array (Kannel's `dlr-url`
 * callbacks: one request per delivery report), or null when the query does not name one.
 */
export type QueryEvent = (query: URLSearchParams) => { key: string; result: string } | null;

export class Receiver {
  url = '';
  posts = 0;
  events = 0;
  /** Events whose (key, result) this receiver had not seen before: `events` without repeated deliveries. */
  distinct = 0;
  /** POSTs that did not hold a JSON array. */
  badPosts = 0;
  firstAt = 0;
  lastAt = 0;
  readonly results = new Map<string, string[]>();
  /** Events whose key could not be read. */
  unkeyed = 0;
  private server: http.Server | null = null;
  private waiters: Array<{ target: number; distinct: boolean; resolve: () => void }> = [];

  constructor(
    readonly name: string,
    private readonly key: EventKey,
    private readonly delayMs = 0,
    /** GET requests carry one event each in their query (read by this); without it a GET is a bad post. */
    private readonly fromQuery: QueryEvent | null = null,
  ) {}

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const finish = () => {
          if (req.method === 'GET' && this.fromQuery) {
            this.recordQuery(new URL(req.url ?? '/', 'http://receiver').searchParams);
          } else {
            this.record(Buffer.concat(chunks).toString('utf8'));
          }
          res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
          res.end('ok');
        };
        if (this.delayMs > 0) {
          setTimeout(finish, this.delayMs);
        } else {
          finish();
        }
      });
    });
    server.keepAliveTimeout = 10_000;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  }

  private record(body: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = null;
    }
    if (!Array.isArray(parsed)) {
      this.badPosts++;
      return;
    }
    this.arrived();
    for (const event of parsed as Array<Record<string, unknown>>) {
      const k = this.key(event);
      const result = typeof event.result === 'string' ? event.result : String(event.type ?? '?');
      this.add(k, result);
    }
    this.wake();
  }

  private recordQuery(query: URLSearchParams): void {
    const event = this.fromQuery!(query);
    if (!event) {
      this.badPosts++;
      return;
    }
    this.arrived();
    this.add(event.key, event.result);
    this.wake();
  }

  /** A request with events came now. */
  private arrived(): void {
    const now = Date.now();
    this.posts++;
    if (this.firstAt === 0) {
      this.firstAt = now;
    }
    this.lastAt = now;
  }

  /** One event of recipient `k` (null: its key could not be read). */
  private add(k: string | null, result: string): void {
    this.events++;
    if (k === null) {
      this.unkeyed++;
      return;
    }
    const list = this.results.get(k);
    if (list) {
      if (!list.includes(result)) {
        this.distinct++;
      }
      list.push(result);
    } else {
      this.distinct++;
      this.results.set(k, [result]);
    }
  }

  /** Resolves the waiters whose target is reached. */
  private wake(): void {
    if (this.waiters.length > 0) {
      const still: typeof this.waiters = [];
      for (const w of this.waiters) {
        if ((w.distinct ? this.distinct : this.events) >= w.target) {
          w.resolve();
        } else {
          still.push(w);
        }
      }
      this.waiters = still;
    }
  }

  reset(): void {
    this.posts = 0;
    this.events = 0;
    this.distinct = 0;
    this.badPosts = 0;
    this.firstAt = 0;
    this.lastAt = 0;
    this.unkeyed = 0;
    this.results.clear();
  }

  /** Resolves true once `target` events (`distinct`: distinct events) arrived, false at the deadline (epoch ms). */
  waitFor(target: number, deadline: number, distinct = false): Promise<boolean> {
    if ((distinct ? this.distinct : this.events) >= target) {
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, Math.max(0, deadline - Date.now()));
      const waiter = {
        target,
        distinct,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      this.waiters.push(waiter);
    });
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }
}

/** Waits until every receiver reached its target (or the deadline); true when all did. */
export async function waitForAll(targets: Array<{ receiver: Receiver; events: number }>, deadline: number): Promise<boolean> {
  const results = await Promise.all(targets.map((t) => t.receiver.waitFor(t.events, deadline)));
  return results.every(Boolean);
}
