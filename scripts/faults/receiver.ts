/**
 * The fault suite's webhook receiver: an HTTP server on a fixed loopback port that can be taken
 * down (connections refused) and brought back. It records every delivered event by
 * message_id + gateway + result (the duplicate key the README gives receivers), how often each
 * arrived, and which final results each message_id got.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { FINAL_RESULTS } from './plan.js';

export class EventReceiver {
  port = 0;
  posts = 0;
  /** Events received, duplicates included. */
  events = 0;
  badPosts = 0;
  /** `message_id \t gateway \t result` → how many times it arrived. */
  readonly triples = new Map<string, number>();
  /** message_id → final results received (a set: repeats of one result are duplicates, not conflicts). */
  readonly finals = new Map<string, Set<string>>();
  /** message_id → every result in arrival order. */
  readonly results = new Map<string, string[]>();
  /** Distinct `delivered` events (the campaign's delivered count as a customer sees it). */
  delivered = 0;
  private server: http.Server | null = null;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  get up(): boolean {
    return this.server !== null;
  }

  async start(): Promise<void> {
    if (this.server) {
      return;
    }
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.record(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
        res.end('ok');
      });
    });
    server.keepAliveTimeout = 10_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Down: open connections are cut and new ones refused until `start()`. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  /** Distinct events received. */
  get distinct(): number {
    return this.triples.size;
  }

  /** Deliveries beyond the first of an event. */
  get duplicates(): number {
    let n = 0;
    for (const count of this.triples.values()) {
      n += count - 1;
    }
    return n;
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
    this.posts++;
    for (const event of parsed as Array<Record<string, unknown>>) {
      this.events++;
      const id = typeof event.message_id === 'string' ? event.message_id : '?';
      const gateway = typeof event.gateway === 'string' ? event.gateway : '?';
      const result = typeof event.result === 'string' ? event.result : String(event.type ?? '?');
      const key = `${id}\t${gateway}\t${result}`;
      const seen = this.triples.get(key) ?? 0;
      this.triples.set(key, seen + 1);
      const list = this.results.get(id);
      if (list) {
        list.push(result);
      } else {
        this.results.set(id, [result]);
      }
      if (seen === 0 && result === 'delivered') {
        this.delivered++;
      }
      if (FINAL_RESULTS.has(result)) {
        const finals = this.finals.get(id);
        if (finals) {
          finals.add(result);
        } else {
          this.finals.set(id, new Set([result]));
        }
      }
    }
  }
}
