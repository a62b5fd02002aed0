/**
 * One Viber connection's carrier: hands `viber` attempts to the connection's dialect over HTTP and
 * reports what became of them (reports.ts decides). Per attempt:
 *
 * - the sender row the step names gives the service id (official) or source name (partner);
 * - a token of the connection's throughput cap (`mps`, the lease-based bucket of
 *   smpp/token-bucket.ts, shared through Redis by every process that runs the connection: at most
 *   `mps` in any second) before each request, retries included;
 * - `seq` and tracking data are the attempt id: a re-hand after a crash gets 12 SRVC_ALREADY_SENT
 *   from the official API instead of a second message, and receipts and replies name the attempt;
 * - the first request goes only while the attempt's dispatch run holds its job (`OutboundAttempt.hold`,
 *   read before the token and after it): a process paused past the job's lock sends nothing more
 *   of the job when it wakes, and the call fails (the run that took the job over hands them);
 * - retryable faults are sent again from an in-process timer, inside the step's ttl. A process
 *   that dies with retries pending leaves them to the step's ttl timer (the engine's backstop); a
 *   connection that closes (shutdown, changed configuration) ends them `failed` with their last
 *   fault, so their flows move on at once.
 *
 * `send` resolves once every attempt has its first answer reported (durable) or a retry planned,
 * so an attempt the engine records as handed over is never lost to a crash before its answer.
 * On an at-most-once lane the partner dialect marks each attempt in Redis before its request: one
 * handed again with its mark there, or whose request got no answer, is reported sent but
 * unconfirmed and not sent again.
 */
import type { Redis } from '../../redis.js';
import type { Logger } from '../../logger.js';
import { holdsJob, type Carrier, type CarrierSink, type OutboundAttempt, type StatusReport } from '../types.js';
import type { ViberAttempt } from '../../channels/index.js';
import type { ConnectionState, SenderSpec } from '../provider.js';
import { RedisTokenBucket } from '../smpp/token-bucket.js';
import type { SendOutcome } from '../http-carrier.js';
import { ViberClient } from './client.js';
import { senderField, type ViberDialect } from './types.js';
import { DEFAULT_RETRY, decideSend, type RetryPolicy } from './reports.js';

/** Attempts of one `send` call waiting for the cap at once. */
const PACERS_PER_SEND = 4;

export interface ViberCarrierOptions {
  connection: string;
  dialect: ViberDialect;
  baseUrl?: string;
  /** Partner: the API key. */
  apiKey?: string;
  /** Partner: the callback URL sent with every message (with the connection's token). */
  callbackUrl?: string;
  /** Messages per second for the connection across every process; absent = no cap. */
  mps?: number;
  sink: CarrierSink;
  redis: Redis;
  redisPrefix: string;
  logger: Logger;
  retry?: RetryPolicy;
  /** HTTP deadline per request (default 10 s). */
  timeoutMs?: number;
}

export function viberCarrierName(connection: string): string {
  return `viber.${connection}`;
}

export function viberBucketKey(redisPrefix: string, connection: string): string {
  return `${redisPrefix}:viber:${connection}:bucket`;
}

/** `result_info` of an attempt that may have been taken and, on an at-most-once lane, is not sent again. */
export const UNCONFIRMED_INFO = 'Sent (unconfirmed: Viber did not answer and it was not sent again)';

/** Accepted, or no answer at all except a refused connection (nothing was written then). */
export function mayHaveBeenTaken(outcome: SendOutcome): boolean {
  if (outcome.kind === 'accepted') return true;
  return outcome.kind === 'retry' && outcome.code === 0 && !/^\[0\] ECONNREFUSED\b/.test(outcome.info);
}

interface PendingRetry {
  attempt: ViberAttempt;
  timer: NodeJS.Timeout;
  info: string;
}

interface Progress {
  tries: number;
  deadline: number;
}

export class ViberCarrier implements Carrier {
  readonly name: string;
  private readonly client: ViberClient;
  private readonly bucket: RedisTokenBucket | null;
  private readonly retryPolicy: RetryPolicy;
  /** `<accountId>\0<sender>` → service id (official) or source name (partner). */
  private senders = new Map<string, number | string>();
  private readonly retries = new Map<number, PendingRetry>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly warned = new Set<string>();
  private lastError: { detail: string; at: number } | null = null;
  private closed = false;

  constructor(private readonly opts: ViberCarrierOptions) {
    this.name = viberCarrierName(opts.connection);
    this.client = new ViberClient({
      dialect: opts.dialect,
      ...(opts.baseUrl && { baseUrl: opts.baseUrl }),
      ...(opts.apiKey && { apiKey: opts.apiKey }),
      ...(opts.callbackUrl && { callbackUrl: opts.callbackUrl }),
      connections: 64,
      timeoutMs: opts.timeoutMs ?? 10_000,
      metrics: { kind: 'viber', connection: opts.connection },
    });
    this.bucket = opts.mps ? new RedisTokenBucket(opts.redis, viberBucketKey(opts.redisPrefix, opts.connection), { tps: opts.mps }) : null;
    this.retryPolicy = opts.retry ?? DEFAULT_RETRY;
  }

  /** The sender rows of this connection (details checked by the provider). */
  setSenders(senders: readonly SenderSpec[]): void {
    const next = new Map<string, number | string>();
    const field = senderField(this.opts.dialect);
    for (const s of senders) {
      const value = s.details[field];
      if (typeof value === 'number' || typeof value === 'string') next.set(`${s.accountId}\u0000${s.sender}`, value);
    }
    this.senders = next;
  }

  state(): ConnectionState {
    // An error is shown until a later request succeeds, or for a minute.
    if (this.lastError && Date.now() - this.lastError.at < 60_000) return { state: 'error', detail: this.lastError.detail };
    return { state: 'ready' };
  }

  async send(attempts: OutboundAttempt[]): Promise<void> {
    if (this.closed) throw new Error(`Viber connection ${this.opts.connection} is closed`);
    const work: Array<Promise<unknown>> = [];
    let unsent = 0;
    let unheld = 0;
    let next = 0;
    // A few attempts of a call wait for the cap at once, not all of them: a large promotional
    // call must not queue the next seconds' tokens ahead of a priority message handed meanwhile.
    const pacers = Array.from({ length: Math.min(PACERS_PER_SEND, attempts.length) }, async () => {
      while (next < attempts.length) {
        const a = attempts[next++]!;
        if (a.channel !== 'viber') {
          work.push(this.report(a, { attemptId: a.attemptId, state: 'failed', resultInfo: `${a.channel} is not carried by Viber`, at: Date.now() }));
          continue;
        }
        // The dispatch run no longer holds its job (`OutboundAttempt.hold`: the process was paused
        // or cut off from Redis past the job's lock): sent by the run that took the job over.
        // Read before the token and again before the request.
        if (!holdsJob(a)) {
          unheld++;
          continue;
        }
        await this.pace();
        if (this.closed) {
          unsent++;
          continue;
        }
        if (!holdsJob(a)) {
          unheld++;
          continue;
        }
        work.push(this.track(this.attempt(a, { tries: 0, deadline: Date.now() + a.ttlMinutes * 60_000 })));
      }
    });
    await Promise.all(pacers);
    await Promise.all(work);
    // Not sent at all: the engine hands them again (in this or another process).
    if (unsent > 0) throw new Error(`Viber connection ${this.opts.connection} closed before ${unsent} attempts were sent`);
    if (unheld > 0) throw new Error(`the dispatch run no longer holds its job: ${unheld} Viber attempts not sent, handed again`);
  }

  /** The connection's cap (`mps`), shared by every process: never more than `mps` in a second. */
  private async pace(): Promise<void> {
    if (this.bucket) await this.bucket.take();
  }

  private track(p: Promise<void>): Promise<void> {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p)).catch(() => undefined);
    return p;
  }

  private report(a: OutboundAttempt, report: StatusReport): Promise<boolean | void> {
    return this.opts.sink.report([report], a.priority ? { priority: true } : undefined);
  }

  private async attempt(a: ViberAttempt, progress: Progress): Promise<void> {
    const sender = this.senders.get(`${a.accountId}\u0000${a.sender}`);
    const now = Date.now();
    if (sender === undefined) {
      const info = `[0] Sender "${a.sender}" has no ${senderField(this.opts.dialect)} on connection ${this.opts.connection}`;
      this.warnOnce(a, 'config', info);
      await this.report(a, { attemptId: a.attemptId, state: 'failed', resultInfo: info, at: now });
      return;
    }
    // At-most-once lanes (AT_MOST_ONCE_LANES), partner dialect: it has no key to recognise a
    // repeat, so a send that may have reached it (marked in Redis before it goes) is never made
    // again; the official `seq` answers a repeat with 12 instead, so it needs no mark.
    const marked = a.atMostOnce === true && this.opts.dialect === 'partner';
    const markKey = `${this.opts.redisPrefix}:viber:${this.opts.connection}:sending:${a.attemptId}`;
    if (marked) {
      const first = await this.opts.redis.set(markKey, '1', 'PX', Math.max(1000, progress.deadline - now), 'NX');
      if (first === null) {
        await this.report(a, { attemptId: a.attemptId, state: 'sent', resultInfo: UNCONFIRMED_INFO, at: now });
        return;
      }
    }
    const outcome = await this.client.send({
      to: a.to,
      text: a.text,
      ...(a.button && { button: a.button }),
      // What is left of the step's ttl: a retry does not outlive the step.
      ttlSeconds: Math.max(1, Math.round((progress.deadline - now) / 1000)),
      promotional: a.priority !== true,
      ourRef: String(a.attemptId),
      sender,
      seq: a.attemptId,
    });
    const decision = decideSend(outcome, {
      attemptId: a.attemptId, carrier: this.name, tries: progress.tries, now: Date.now(), deadline: progress.deadline,
      policy: this.retryPolicy, random: Math.random(),
    });
    if (outcome.kind === 'accepted') {
      this.lastError = null;
    } else if (outcome.kind === 'failed' && outcome.config) {
      this.lastError = { detail: outcome.info, at: Date.now() };
    } else if (outcome.kind === 'retry' && outcome.code === 0) {
      this.lastError = { detail: outcome.info, at: Date.now() }; // no answer at all
    }
    if (marked) {
      if (mayHaveBeenTaken(outcome)) {
        if (outcome.kind !== 'accepted') {
          // No answer: it may have been taken; at most once, so it is not sent again.
          await this.report(a, { attemptId: a.attemptId, state: 'sent', resultInfo: UNCONFIRMED_INFO, at: Date.now() });
          return;
        }
      } else {
        await this.opts.redis.del(markKey); // the partner answered that it did not take it
      }
    }
    if (decision.kind === 'report') {
      if (decision.warn) this.warnOnce(a, decision.warn, decision.report.resultInfo);
      await this.report(a, decision.report);
      return;
    }
    if (decision.throttled && this.bucket) {
      // Throttled by the carrier: every process of this connection holds back.
      await this.bucket.pause(decision.delayMs).catch((err: unknown) =>
        this.opts.logger.warn({ err: (err as Error).message, carrier: this.name }, 'could not share the Viber pause'));
    }
    if (this.closed) {
      await this.abandon(a, decision.info);
      return;
    }
    this.later(a, { tries: progress.tries + 1, deadline: progress.deadline }, decision.delayMs, decision.info);
  }

  /** The same attempt again after `delayMs` (in this process; see the header for a crash). */
  private later(a: ViberAttempt, progress: Progress, delayMs: number, info: string): void {
    const timer = setTimeout(() => {
      this.retries.delete(a.attemptId);
      void this.track((async () => {
        await this.pace();
        if (this.closed) {
          await this.abandon(a, info);
          return;
        }
        await this.attempt(a, progress);
      })()).catch((err: unknown) =>
        this.opts.logger.error({ err: (err as Error).message, carrier: this.name, attemptId: a.attemptId }, 'Viber retry failed'));
    }, delayMs);
    timer.unref();
    this.retries.set(a.attemptId, { attempt: a, timer, info });
  }

  private abandon(a: ViberAttempt, info: string): Promise<boolean | void> {
    return this.report(a, { attemptId: a.attemptId, state: 'failed', resultInfo: `${info}; not retried: the connection closed`, at: Date.now() });
  }

  /** Configuration faults are logged once per sender and code (every attempt of that sender would repeat them). */
  private warnOnce(a: ViberAttempt, kind: 'config' | 'request', info: string): void {
    const key = `${kind}\u0000${a.accountId}\u0000${a.sender}\u0000${info.slice(0, info.indexOf(']') + 1)}`;
    if (this.warned.has(key)) return;
    if (this.warned.size > 10_000) this.warned.clear();
    this.warned.add(key);
    this.opts.logger.warn({ carrier: this.name, account: a.accountId, sender: a.sender, result_info: info },
      kind === 'config' ? 'Viber refuses this sender: an operator must act (further failures of it are not logged)' : 'Viber refused a request');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pending = [...this.retries.values()];
    this.retries.clear();
    for (const r of pending) clearTimeout(r.timer);
    const abandoned = pending.map((r) => this.abandon(r.attempt, r.info).catch((err: unknown) =>
      this.opts.logger.error({ err: (err as Error).message, carrier: this.name }, 'Viber retry not ended')));
    await Promise.allSettled([...this.inFlight, ...abandoned]);
    await this.bucket?.close(); // unspent tokens go back to the other processes
    await this.client.close();
  }
}
