/**
 * The WhatsApp simulator's webhook side: items (statuses, inbound messages, account updates)
 * are scheduled for a moment, items due together are put into one Meta envelope per callback
 * URL, signed like Meta (`X-Hub-Signature-256` over the exact bytes, JSON with non-ASCII escaped)
 * and POSTed over keep-alive connections; non-2xx answers and network failures are retried a few
 * times with the same bytes. One timer serves every scheduled item, and both the schedule and the
 * outbox are bounded: what does not fit is dropped and counted.
 */
import { createHmac, randomInt } from 'node:crypto';
import { Pool } from 'undici';

/** One item of a webhook, before it is grouped into an envelope. */
export type WebhookItem =
  | {
    field: 'messages';
    wabaId: string;
    phoneNumberId: string;
    displayPhoneNumber: string;
    status?: Record<string, unknown>;
    message?: Record<string, unknown>;
    contact?: Record<string, unknown>;
  }
  | { field: 'account_update'; wabaId: string; value: Record<string, unknown> };

interface Scheduled {
  at: number;
  seq: number;
  url: string;
  /** Copies of an item go into separate POSTs (duplicate deliveries, as Meta makes them). */
  copy: number;
  item: WebhookItem;
}

export interface Delivery {
  url: string;
  /** HTTP status of the last attempt; 0 when it did not get one. */
  status: number;
  error?: string;
  attempts: number;
  items: number;
  at: number;
  body: string;
  signature: string;
}

export interface EmitterOptions {
  appSecret: string;
  /** Items per POST at most (default 100). */
  batchMax?: number;
  /** Items due within this many ms of each other go out together (default 10). */
  batchWindowMs?: number;
  /** Items waiting for their moment at most (default 500 000). */
  maxScheduled?: number;
  /** POSTs waiting to be sent or retried at most (default 10 000). */
  maxQueued?: number;
  /** POSTs in flight at once (default 16). */
  concurrency?: number;
  /** Delay before each retry of a failed POST; its length is the number of retries (default 200, 1000, 3000 ms). */
  retryDelaysMs?: number[];
  /** Deadline per POST (default 5000 ms). */
  timeoutMs?: number;
  /** Deliveries kept for inspection (default 200). */
  logSize?: number;
}

export interface EmitterStats {
  scheduled: number;
  queued: number;
  inFlight: number;
  posts: number;
  delivered: number;
  retries: number;
  failedPosts: number;
  droppedItems: number;
}

/** JSON as Meta writes it: every non-ASCII character as a \u escape. */
export function metaJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

interface Batch {
  url: string;
  bytes: Buffer;
  signature: string;
  items: number;
  attempts: number;
  /** The emitter's generation when queued: a batch from before a clear() is not retried. */
  gen: number;
}

class Heap {
  private readonly a: Scheduled[] = [];
  get size(): number {
    return this.a.length;
  }
  peek(): Scheduled | undefined {
    return this.a[0];
  }
  clear(): void {
    this.a.length = 0;
  }
  private less(i: number, j: number): boolean {
    const x = this.a[i]!;
    const y = this.a[j]!;
    return x.at < y.at || (x.at === y.at && x.seq < y.seq);
  }
  private swap(i: number, j: number): void {
    const t = this.a[i]!;
    this.a[i] = this.a[j]!;
    this.a[j] = t;
  }
  push(s: Scheduled): void {
    this.a.push(s);
    let i = this.a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }
  pop(): Scheduled | undefined {
    const top = this.a[0];
    const last = this.a.pop();
    if (this.a.length > 0 && last) {
      this.a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.a.length && this.less(l, m)) m = l;
        if (r < this.a.length && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }
}

export class WebhookEmitter {
  /** Sign with a wrong key (the receiver must refuse these). */
  badSignature = false;
  private readonly heap = new Heap();
  private readonly outbox: Batch[] = [];
  private readonly pools = new Map<string, Pool>();
  private readonly log: Delivery[] = [];
  private readonly idleWaiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private seq = 0;
  private gen = 0;
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private inFlight = 0;
  private closed = false;
  private readonly counters = { posts: 0, delivered: 0, retries: 0, failedPosts: 0, droppedItems: 0 };
  private readonly o: Required<EmitterOptions>;

  constructor(opts: EmitterOptions) {
    this.o = {
      batchMax: 100, batchWindowMs: 10, maxScheduled: 500_000, maxQueued: 10_000, concurrency: 16,
      retryDelaysMs: [200, 1000, 3000], timeoutMs: 5000, logSize: 200, ...opts,
    };
  }

  set appSecret(secret: string) {
    this.o.appSecret = secret;
  }

  /** Schedules an item for `at` (unix ms). False when the schedule is full and the item was dropped. */
  schedule(at: number, url: string, item: WebhookItem, copy = 0): boolean {
    if (this.closed) return false;
    if (this.heap.size >= this.o.maxScheduled) {
      this.counters.droppedItems++;
      return false;
    }
    const w = this.o.batchWindowMs;
    const due = w > 1 ? Math.ceil(at / w) * w : at;
    this.heap.push({ at: due, seq: this.seq++, url, copy, item });
    this.arm();
    return true;
  }

  private arm(): void {
    const top = this.heap.peek();
    if (!top || top.at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = top.at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, top.at - Date.now()));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = Date.now();
    const groups = new Map<string, Scheduled[]>();
    for (let top = this.heap.peek(); top && top.at <= now + 1; top = this.heap.peek()) {
      this.heap.pop();
      const key = `${top.copy} ${top.url}`;
      const group = groups.get(key);
      if (group) group.push(top);
      else groups.set(key, [top]);
    }
    for (const group of groups.values()) {
      for (let i = 0; i < group.length; i += this.o.batchMax) this.enqueue(group[0]!.url, group.slice(i, i + this.o.batchMax));
    }
    this.arm();
    this.pump();
    this.checkIdle();
  }

  private enqueue(url: string, items: Scheduled[]): void {
    if (this.outbox.length + this.retryTimers.size >= this.o.maxQueued) {
      this.counters.droppedItems += items.length;
      return;
    }
    const text = metaJson(envelope(items.map((s) => s.item)));
    const bytes = Buffer.from(text, 'utf8');
    const key = this.badSignature ? `${this.o.appSecret}-wrong` : this.o.appSecret;
    const signature = `sha256=${createHmac('sha256', key).update(bytes).digest('hex')}`;
    this.outbox.push({ url, bytes, signature, items: items.length, attempts: 0, gen: this.gen });
  }

  private pool(url: URL): Pool {
    let pool = this.pools.get(url.origin);
    if (!pool) {
      pool = new Pool(url.origin, {
        connections: this.o.concurrency, keepAliveTimeout: 30_000,
        headersTimeout: this.o.timeoutMs, bodyTimeout: this.o.timeoutMs, connectTimeout: this.o.timeoutMs,
      });
      this.pools.set(url.origin, pool);
    }
    return pool;
  }

  private pump(): void {
    while (!this.closed && this.inFlight < this.o.concurrency && this.outbox.length > 0) {
      const batch = this.outbox.shift()!;
      this.inFlight++;
      void this.post(batch).finally(() => {
        this.inFlight--;
        this.pump();
        this.checkIdle();
      });
    }
  }

  private async post(batch: Batch): Promise<void> {
    batch.attempts++;
    this.counters.posts++;
    let status = 0;
    let error: string | undefined;
    try {
      const url = new URL(batch.url);
      const res = await this.pool(url).request({
        method: 'POST', path: `${url.pathname}${url.search}`, body: batch.bytes,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': batch.signature, 'user-agent': 'facebookexternalua' },
        signal: AbortSignal.timeout(this.o.timeoutMs),
      });
      status = res.statusCode;
      await res.body.dump();
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    if (batch.gen !== this.gen) return; // sent before a clear(): not this run's business
    const ok = status >= 200 && status < 300;
    this.record(batch, status, error);
    if (ok) {
      this.counters.delivered++;
      return;
    }
    const delay = this.o.retryDelaysMs[batch.attempts - 1];
    if (delay === undefined || this.closed) {
      this.counters.failedPosts++;
      this.counters.droppedItems += batch.items;
      return;
    }
    this.counters.retries++;
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      this.outbox.push(batch);
      this.pump();
    }, delay);
    this.retryTimers.add(timer);
  }

  private record(batch: Batch, status: number, error: string | undefined): void {
    const d: Delivery = { url: batch.url, status, attempts: batch.attempts, items: batch.items, at: Date.now(), body: batch.bytes.toString('utf8'), signature: batch.signature };
    if (error !== undefined) d.error = error;
    this.log.push(d);
    if (this.log.length > this.o.logSize) this.log.splice(0, this.log.length - this.o.logSize);
  }

  /** Recent POST attempts, newest first. */
  deliveries(limit = this.o.logSize): Delivery[] {
    return this.log.slice(-limit).reverse();
  }

  stats(): EmitterStats {
    return { scheduled: this.heap.size, queued: this.outbox.length + this.retryTimers.size, inFlight: this.inFlight, ...this.counters };
  }

  private busy(): boolean {
    return this.heap.size > 0 || this.outbox.length > 0 || this.retryTimers.size > 0 || this.inFlight > 0;
  }

  private checkIdle(): void {
    if (this.busy()) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Resolves once nothing is scheduled, queued, waiting for a retry or in flight. */
  idle(timeoutMs = 10_000): Promise<void> {
    if (!this.busy()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        const i = this.idleWaiters.indexOf(done);
        if (i >= 0) this.idleWaiters.splice(i, 1);
        reject(new Error(`webhooks still busy after ${timeoutMs} ms: ${JSON.stringify(this.stats())}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(t);
        resolve();
      };
      this.idleWaiters.push(done);
    });
  }

  /** Forgets everything scheduled and queued (POSTs in flight finish), the log and the counters. */
  clear(): void {
    this.gen++;
    this.heap.clear();
    for (const t of this.retryTimers) clearTimeout(t);
    this.retryTimers.clear();
    this.outbox.length = 0;
    this.log.length = 0;
    for (const k of Object.keys(this.counters) as (keyof typeof this.counters)[]) this.counters[k] = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.checkIdle();
  }

  /**
   * Meta's verification GET: `hub.mode=subscribe`, a random `hub.challenge`, the verify token.
   * Throws unless the answer is 200 with the challenge as its body.
   */
  async handshake(callbackUrl: string, verifyToken: string): Promise<void> {
    const url = new URL(callbackUrl);
    const challenge = String(randomInt(1, 2 ** 31 - 1));
    url.searchParams.set('hub.mode', 'subscribe');
    url.searchParams.set('hub.challenge', challenge);
    url.searchParams.set('hub.verify_token', verifyToken);
    let status: number;
    let text: string;
    try {
      const res = await this.pool(url).request({ method: 'GET', path: `${url.pathname}${url.search}`, signal: AbortSignal.timeout(this.o.timeoutMs) });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      throw new Error(`webhook verification of ${callbackUrl} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (status !== 200 || text.trim() !== challenge) {
      throw new Error(`webhook verification of ${callbackUrl} failed: HTTP ${status}, body ${JSON.stringify(text.slice(0, 100))} instead of the challenge ${challenge}`);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.clear();
    for (const w of this.idleWaiters.splice(0)) w();
    await Promise.all([...this.pools.values()].map((p) => p.destroy()));
    this.pools.clear();
  }
}

/** Groups items into Meta's envelope: one entry per WABA, one change per number and kind (statuses, messages) or account update. */
export function envelope(items: WebhookItem[]): Record<string, unknown> {
  const entries = new Map<string, { id: string; time?: number; changes: Record<string, unknown>[]; byKey: Map<string, Record<string, unknown[] | unknown>> }>();
  const time = Math.floor(Date.now() / 1000);
  for (const item of items) {
    let entry = entries.get(item.wabaId);
    if (!entry) {
      entry = { id: item.wabaId, changes: [], byKey: new Map() };
      entries.set(item.wabaId, entry);
    }
    if (item.field === 'account_update') {
      entry.time = time;
      entry.changes.push({ value: item.value, field: 'account_update' });
      continue;
    }
    const kind = item.status ? 'statuses' : 'messages';
    const key = `${item.phoneNumberId} ${kind}`;
    let value = entry.byKey.get(key);
    if (!value) {
      value = { messaging_product: 'whatsapp', metadata: { display_phone_number: item.displayPhoneNumber.replace(/\D/g, ''), phone_number_id: item.phoneNumberId } };
      entry.byKey.set(key, value);
      entry.changes.push({ value, field: 'messages' });
    }
    if (item.status) push(value, 'statuses', item.status);
    if (item.contact) push(value, 'contacts', item.contact);
    if (item.message) push(value, 'messages', item.message);
  }
  return {
    object: 'whatsapp_business_account',
    entry: [...entries.values()].map((e) => (e.time === undefined ? { id: e.id, changes: e.changes } : { id: e.id, time: e.time, changes: e.changes })),
  };
}

function push(value: Record<string, unknown>, key: string, item: unknown): void {
  const list = value[key];
  if (Array.isArray(list)) list.push(item);
  else value[key] = [item];
}
