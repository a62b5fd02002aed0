/**
 * The Viber simulator's callback sender. Events are kept in time buckets (one timer per bucket,
 * however many events fall in it); when a bucket is due, its events are grouped per target (URL
 * and headers) and POSTed in batches of at most the target's size (1 = one JSON object per POST,
 * more = a JSON array). Keep-alive connections per origin, a cap on POSTs in flight, and a few
 * bounded retries on non-2xx answers and network errors.
 */
import { Pool } from 'undici';
import { Semaphore } from '../../../shared/semaphore.js';

export interface CallbackTarget {
  url: string;
  headers: Record<string, string>;
  /** Events per POST: 1 sends a bare object, more an array. */
  batch: number;
}

export interface EmittedCallback {
  url: string;
  body: string;
  /** Answer status of the last try; 0 = network error. */
  status: number;
  tries: number;
  at: number;
}

export interface CallbackStats {
  posts: number;
  events: number;
  retries: number;
  /** POSTs given up after every retry. */
  failures: number;
}

export interface DispatcherOptions {
  tickMs: number;
  retries: number;
  retryDelayMs: number;
  concurrency: number;
  timeoutMs: number;
  /** How many emitted POSTs are kept for inspection. */
  keepEmitted: number;
}

interface Item {
  target: CallbackTarget | null;
  body: unknown;
  /** Run when the event is sent (the simulator's own state changes, e.g. a partner status). */
  onSend?: () => void;
}

export class CallbackDispatcher {
  private readonly buckets = new Map<number, Item[]>();
  private readonly timers = new Map<number, NodeJS.Timeout>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private readonly pools = new Map<string, Pool>();
  private readonly turns: Semaphore;
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];
  private generation = 0;
  readonly stats: CallbackStats = { posts: 0, events: 0, retries: 0, failures: 0 };
  private emitted: EmittedCallback[] = [];

  constructor(private readonly opts: DispatcherOptions) {
    this.turns = new Semaphore(opts.concurrency);
  }

  /** `target` null: nothing is posted, `onSend` still runs when due (a partner status that is only polled). */
  schedule(afterMs: number, target: CallbackTarget | null, body: unknown, onSend?: () => void): void {
    const tick = this.opts.tickMs;
    const bucket = Math.ceil((Date.now() + Math.max(0, afterMs)) / tick);
    let items = this.buckets.get(bucket);
    if (!items) {
      items = [];
      this.buckets.set(bucket, items);
      const timer = setTimeout(() => this.flush(bucket), Math.max(0, bucket * tick - Date.now()));
      this.timers.set(bucket, timer);
    }
    items.push({ target, body, onSend });
  }

  private flush(bucket: number): void {
    const items = this.buckets.get(bucket) ?? [];
    this.buckets.delete(bucket);
    this.timers.delete(bucket);
    // Grouped by target object: the simulator reuses one object per URL, headers and batch size.
    const groups = new Map<CallbackTarget, Item[]>();
    for (const item of items) {
      item.onSend?.();
      if (!item.target) continue;
      let group = groups.get(item.target);
      if (!group) groups.set(item.target, (group = []));
      group.push(item);
    }
    for (const [target, group] of groups) {
      const size = Math.max(1, target.batch);
      for (let i = 0; i < group.length; i += size) {
        const chunk = group.slice(i, i + size);
        const body = size === 1 ? JSON.stringify(chunk[0]!.body) : JSON.stringify(chunk.map((c) => c.body));
        this.stats.events += chunk.length;
        void this.post(target, body, 1, this.generation);
      }
    }
    this.checkIdle();
  }

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, { connections: 16, keepAliveTimeout: 30_000, headersTimeout: this.opts.timeoutMs, bodyTimeout: this.opts.timeoutMs });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  private async post(target: CallbackTarget, body: string, tries: number, generation: number): Promise<void> {
    this.inFlight++;
    let status = 0;
    try {
      status = await this.turns.run(async () => {
        if (generation !== this.generation) return -1;
        const url = new URL(target.url);
        const res = await this.pool(url.origin).request({
          method: 'POST',
          path: `${url.pathname}${url.search}`,
          headers: { 'content-type': 'application/json', 'user-agent': 'viber-sim/1.0', ...target.headers },
          body,
          signal: AbortSignal.timeout(this.opts.timeoutMs),
        });
        await res.body.dump();
        return res.statusCode;
      });
    } catch {
      status = 0;
    }
    if (status !== -1 && generation === this.generation) {
      this.stats.posts++;
      this.record({ url: target.url, body, status, tries, at: Date.now() });
      if (status < 200 || status > 299) {
        if (tries <= this.opts.retries) {
          this.stats.retries++;
          const timer = setTimeout(() => {
            this.retryTimers.delete(timer);
            void this.post(target, body, tries + 1, generation);
          }, this.opts.retryDelayMs * 2 ** (tries - 1));
          this.retryTimers.add(timer);
        } else {
          this.stats.failures++;
        }
      }
    }
    this.inFlight--;
    this.checkIdle();
  }

  private record(e: EmittedCallback): void {
    this.emitted.push(e);
    if (this.emitted.length > this.opts.keepEmitted * 2) this.emitted = this.emitted.slice(-this.opts.keepEmitted);
  }

  /** The last `limit` POSTs, newest first. */
  recent(limit: number): EmittedCallback[] {
    return this.emitted.slice(-Math.min(limit, this.opts.keepEmitted)).reverse();
  }

  get pending(): number {
    let n = this.inFlight + this.retryTimers.size;
    for (const items of this.buckets.values()) n += items.length;
    return n;
  }

  /** Resolves once nothing is scheduled, in flight or waiting for a retry. */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private checkIdle(): void {
    if (this.idleWaiters.length > 0 && this.pending === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Drops everything scheduled or waiting for a retry; POSTs in flight finish unrecorded. */
  clear(): void {
    this.generation++;
    for (const t of this.timers.values()) clearTimeout(t);
    for (const t of this.retryTimers) clearTimeout(t);
    this.timers.clear();
    this.retryTimers.clear();
    this.buckets.clear();
    this.emitted = [];
    Object.assign(this.stats, { posts: 0, events: 0, retries: 0, failures: 0 });
    this.checkIdle();
  }

  async close(): Promise<void> {
    this.clear();
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((p) => p.destroy()));
  }
}
