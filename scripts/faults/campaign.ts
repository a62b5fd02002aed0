/**
 * The campaign a customer sends while the faults happen: `POST /v2/messages` calls of 100
 * recipients (10 message objects of 10), each sent at its planned time (`callOffsets`: in bursts
 * just before the faults), over keep-alive connections with a bounded number in flight; and single
 * priority messages (`POST /v2/message`, tag `priority`) beside it during the whole window. A call that is not answered 200 is sent
 * again (as a client would after a 503 or a broken connection) until it is, or the deadline.
 */
import { Pool } from 'undici';
import { campaignPhone, priorityPhone } from './plan.js';

export interface Accepted {
  phone: string;
  /** When the 200 that named it arrived (epoch ms). */
  acceptedAt: number;
  priority: boolean;
}

export interface CampaignOptions {
  origin: string;
  apiKey: string;
  callback: string;
  recipients: number;
  concurrency: number;
  /** When each call of 100 recipients is due, ms after the start (ascending). */
  callOffsetsMs: number[];
  /** Priority messages are sent during this window. */
  windowMs: number;
  /** One priority message this often during the window (0: none). */
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
  lastAcceptAt = 0;
  prioritySent = 0;
  private readonly pool: Pool;

  constructor(private readonly opts: CampaignOptions) {
    this.pool = new Pool(opts.origin, { connections: opts.concurrency + 2, pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000 });
  }

  get acknowledgedRecipients(): number {
    return this.accepted.size;
  }

  /** Sends the whole campaign and the priority messages; resolves when every call was answered 200 or given up. */
  async run(): Promise<void> {
    const t0 = Date.now();
    const callsTotal = Math.ceil(this.opts.recipients / 100);
    let next = 0;
    const worker = async () => {
      while (next < callsTotal) {
        const i = next++;
        const due = t0 + (this.opts.callOffsetsMs[i] ?? 0);
        if (due > Date.now()) {
          await sleep(due - Date.now());
        }
        await this.sendCall(i);
      }
    };
    const bulk = Promise.all(Array.from({ length: this.opts.concurrency }, worker));
    const priority = this.opts.priorityIntervalMs > 0 ? this.priorityLoop(t0) : Promise.resolve();
    await Promise.all([bulk, priority]);
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
    this.lastAcceptAt = now;
    this.rejectedObjects += body.rejected?.length ?? 0;
    for (const a of body.accepted ?? []) {
      const o = Number(a.key);
      for (let k = 0; k < 10 && o * 10 + k < phones.length; k++) {
        this.accepted.set(`${a.message_id}-${k}`, { phone: phones[o * 10 + k]!, acceptedAt: now, priority: false });
      }
    }
  }

  private async priorityLoop(t0: number): Promise<void> {
    const sends: Array<Promise<void>> = [];
    for (let j = 0; t0 + j * this.opts.priorityIntervalMs < t0 + this.opts.windowMs; j++) {
      const due = t0 + j * this.opts.priorityIntervalMs + this.opts.priorityIntervalMs / 2;
      if (due > Date.now()) {
        await sleep(due - Date.now());
      }
      sends.push(this.sendPriority(j));
    }
    await Promise.all(sends);
  }

  private async sendPriority(j: number): Promise<void> {
    const phone = priorityPhone(j);
    this.prioritySent++;
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
      this.accepted.set(id, { phone, acceptedAt: Date.now(), priority: true });
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
