/**
 * The campaign a customer sends while the faults happen: `POST /v2/messages` calls of 100
 * recipients (10 message objects of 10) in bursts (`burst()`: the suite sends one at the start and
 * one just before each fault, so that every fault meets a backlog in flight), over keep-alive
 * connections with a bounded number in flight; and single priority messages (`POST /v2/message`,
 * tag `priority`) at a steady pace during the whole window, with a flurry around each fault
 * (`priorityFlurry()`), so that a killed process is likely to hold one. A call that is not
 * answered 200 is sent again (as a client would after a 503 or a broken connection) until it is,
 * or the deadline.
 */
import { Pool } from 'undici';
import { campaignPhone, priorityPhone, scheduledPhone } from './plan.js';

export interface Accepted {
  phone: string;
  /** When the 200 that named it arrived (epoch ms). */
  acceptedAt: number;
  priority: boolean;
  /** Scheduled for this time (epoch ms); 0 = sent at once. */
  dueAt: number;
}

export interface CampaignOptions {
  origin: string;
  apiKey: string;
  callback: string;
  recipients: number;
  concurrency: number;
  /** One priority message this often until `stopPriority()` (0: none besides the flurries). */
  priorityIntervalMs: number;
  /** No call is started or retried after this (epoch ms). */
  deadline: number;
  /** The name of the fault in progress when an answer came ('' = none). */
  activeFault: () => string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class Campaign {
  /** Recipient id (as webhooks carry it) → what was acknowledged. */
  readonly accepted = new Map<string, Accepted>();
  /** fault in progress ('' none) → answer ('200', '503', 'network', …) → tries. */
  readonly answers = new Map<string, Map<string, number>>();
  /** Examples of answers other than 200 (status and body). */
  readonly oddAnswers: string[] = [];
  calls = 0;
  retries = 0;
  /** Calls (or priority messages) given up at the deadline. */
  abandoned = 0;
  /** Objects rejected inside a 200 answer (none expected). */
  rejectedObjects = 0;
  prioritySent = 0;
  private readonly pool: Pool;
  private nextCall = 0;
  private readonly pending = new Set<Promise<void>>();
  private priorityTimer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: CampaignOptions) {
    this.pool = new Pool(opts.origin, { connections: opts.concurrency + 4, pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000 });
  }

  get acknowledgedRecipients(): number {
    return this.accepted.size;
  }

  get callsTotal(): number {
    return Math.ceil(this.opts.recipients / 100);
  }

  /** Sends the next `calls` calls of the campaign, `concurrency` at a time (not awaited: see `settled()`). */
  burst(calls: number): void {
    const first = this.nextCall;
    const last = Math.min(this.callsTotal, first + calls);
    this.nextCall = last;
    let next = first;
    const worker = async () => {
      while (next < last) {
        await this.sendCall(next++);
      }
    };
    this.track(Promise.all(Array.from({ length: this.opts.concurrency }, worker)).then(() => undefined));
  }

  /**
   * Scheduled messages (`datetime`), one of 5 recipients per due time, in calls of up to 10: their
   * dispatch jobs wait in Redis as delayed jobs and run when due, whatever is down then.
   */
  scheduled(dueAt: number[]): void {
    let k = 0;
    for (let c = 0; c < dueAt.length; c += 10) {
      const objects = dueAt.slice(c, c + 10).map((due) => {
        const phones = Array.from({ length: 5 }, () => scheduledPhone(k++));
        return { due, phones };
      });
      const text = `[${objects.map((o) => JSON.stringify({
        body: 'Reminder: your appointment is tomorrow', to: o.phones.map((p) => ({ phone_number: `+${p}` })),
        datetime: new Date(o.due).toISOString(), callback: this.opts.callback,
      })).join(',')}]`;
      this.track((async () => {
        const answer = await this.post('/v2/messages', text);
        if (answer === null) {
          this.abandoned++;
          return;
        }
        const body = JSON.parse(answer) as { accepted?: Array<{ key: string; message_id: string }>; rejected?: unknown[] };
        this.rejectedObjects += body.rejected?.length ?? 0;
        const now = Date.now();
        for (const a of body.accepted ?? []) {
          const o = objects[Number(a.key)]!;
          o.phones.forEach((phone, i) => this.accepted.set(`${a.message_id}-${i}`, { phone, acceptedAt: now, priority: false, dueAt: o.due }));
        }
      })());
    }
  }

  /** Starts the steady priority messages. */
  startPriority(): void {
    if (this.opts.priorityIntervalMs > 0) {
      this.priorityTimer = setInterval(() => this.track(this.sendPriority()), this.opts.priorityIntervalMs);
    }
  }

  stopPriority(): void {
    if (this.priorityTimer) {
      clearInterval(this.priorityTimer);
    }
  }

  /** `count` priority messages `spacingMs` apart, starting now (not awaited). */
  priorityFlurry(count: number, spacingMs: number): void {
    this.track((async () => {
      for (let k = 0; k < count; k++) {
        this.track(this.sendPriority());
        await sleep(spacingMs);
      }
    })());
  }

  /** Resolves when every call and priority message started so far was answered 200 or given up. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) {
      await Promise.all([...this.pending]);
    }
  }

  private track(p: Promise<void>): void {
    const tracked = p.catch((err: unknown) => {
      this.oddAnswers.push(`campaign error: ${(err as Error).message}`);
    }).finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  private body(i: number): { text: string; phones: string[] } {
    const phones: string[] = [];
    for (let k = i * 100; k < Math.min(this.opts.recipients, i * 100 + 100); k++) {
      phones.push(campaignPhone(k));
    }
    const objects: string[] = [];
    for (let o = 0; o < phones.length; o += 10) {
      const to = phones.slice(o, o + 10).map((p) => `{"phone_number":"+${p}"}`).join(',');
      objects.push(`{"body":"Weekly offer: 20 % off everything","to":[${to}],"callback":${JSON.stringify(this.opts.callback)}}`);
    }
    return { text: `[${objects.join(',')}]`, phones };
  }

  private async sendCall(i: number): Promise<void> {
    const { text, phones } = this.body(i);
    this.calls++;
    const answer = await this.post('/v2/messages', text);
    if (answer === null) {
      this.abandoned++;
      return;
    }
    const body = JSON.parse(answer) as { accepted?: Array<{ key: string; message_id: string }>; rejected?: unknown[] };
    const now = Date.now();
    this.rejectedObjects += body.rejected?.length ?? 0;
    for (const a of body.accepted ?? []) {
      const o = Number(a.key);
      for (let k = 0; k < 10 && o * 10 + k < phones.length; k++) {
        this.accepted.set(`${a.message_id}-${k}`, { phone: phones[o * 10 + k]!, acceptedAt: now, priority: false, dueAt: 0 });
      }
    }
  }

  private async sendPriority(): Promise<void> {
    const j = this.prioritySent++;
    const phone = priorityPhone(j);
    const answer = await this.post('/v2/message', JSON.stringify({
      body: `Your code is ${100000 + j}`, to: [{ phone_number: `+${phone}` }], tag: 'priority', callback: this.opts.callback,
    }));
    if (answer === null) {
      this.abandoned++;
      return;
    }
    const body = JSON.parse(answer) as { accepted?: Array<{ message_id: string }> };
    const id = body.accepted?.[0]?.message_id;
    if (id) {
      this.accepted.set(id, { phone, acceptedAt: Date.now(), priority: true, dueAt: 0 });
    }
  }

  /** POSTs until a 200 (its body) or the deadline (null); every answer is counted under the fault in progress. */
  private async post(path: string, body: string): Promise<string | null> {
    let first = true;
    while (Date.now() < this.opts.deadline) {
      if (!first) {
        this.retries++;
      }
      first = false;
      let status = 'network';
      let text = '';
      let retryAfterMs = 1000;
      try {
        const res = await this.pool.request({
          method: 'POST', path, body, signal: AbortSignal.timeout(30_000),
          headers: { 'content-type': 'application/json', 'x-api-key': this.opts.apiKey },
        });
        text = await res.body.text();
        status = String(res.statusCode);
        const ra = Number(res.headers['retry-after']);
        if (Number.isFinite(ra) && ra > 0) {
          retryAfterMs = Math.min(10_000, ra * 1000);
        }
      } catch (err) {
        status = (err as Error).name === 'TimeoutError' ? 'timeout' : 'network';
        text = (err as Error).message;
      }
      this.count(status);
      if (status === '200') {
        return text;
      }
      if (/^4/.test(status) && status !== '408' && status !== '429') {
        this.oddAnswers.push(`${path} ${status}: ${text.slice(0, 200)} (not sent again)`);
        return null;
      }
      if (this.oddAnswers.length < 10 && status !== 'network') {
        this.oddAnswers.push(`${path} ${status} during ${this.opts.activeFault() || 'no fault'}: ${text.slice(0, 200)}`);
      }
      await sleep(retryAfterMs);
    }
    return null;
  }

  private count(status: string): void {
    const fault = this.opts.activeFault();
    let m = this.answers.get(fault);
    if (!m) {
      m = new Map();
      this.answers.set(fault, m);
    }
    m.set(status, (m.get(status) ?? 0) + 1);
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
