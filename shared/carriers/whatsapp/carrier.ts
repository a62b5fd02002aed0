/**
 * One WhatsApp connection's Carrier: hands `whatsapp_text` and `whatsapp_template` attempts to
 * Meta's Cloud API with the business token of the sender row the step names, and reports what
 * became of each through the sink. Statuses after acceptance come back as webhooks (callback.ts).
 *
 * Per `send` call, before any request: the sender rows (from `setSenders`); for attempts handed
 * before (`rehand`), whether Meta already accepted them (never sent twice, see below); for free
 * text, the 24-hour window of every (business number, person) pair in one read (window.ts):
 * outside it the attempt ends `undelivered` `[131047]` without calling Meta; for templates, the
 * WABA's cached templates (templates.ts): language, parameter shapes and the `[132000]` count
 * check. Then each request waits for a token of its business number's throughput cap, shared by
 * every process through Redis (`<prefix>:wa:<phone_number_id>:bucket`), and its answer is read by
 * Meta's error code (errors.ts):
 *
 * - accepted: the wamid is registered against the attempt (a `sending` report with the ref: no
 *   move, no event) and remembered in Redis first;
 * - unreachable: `undelivered` `[code] title`, the flow falls back at once (refunded, D3);
 * - failed: `failed` `[code] title`; a configuration or account problem is logged at warn once per
 *   sender and code;
 * - retry (throttling, a fault at Meta, no answer): the same attempt again after a backoff, while
 *   its step's ttl lasts, from an in-process timer; throttling also pauses the business number for
 *   every process. A retry that would fall after the ttl ends the attempt `failed` with the last
 *   answer instead. A process that dies with retries pending leaves their attempts to the step's
 *   ttl timer (the engine's, in Redis), which ends them `undelivered` `[1] TTL expired`.
 *
 * `send` resolves once every attempt's first outcome is durable (reported through the sink), so a
 * process that dies before that leaves the attempts to be handed again (`rehand`). An attempt's
 * first try is made only while its dispatch run holds its job (`OutboundAttempt.hold`, read before
 * the token and before the request): a process paused past the job's lock wakes, gives the
 * attempts it had not sent back (`WhatsappHoldLapsed`: the call fails) and the run that took the
 * job over sends them. A second run of the same job in this process (BullMQ gave the job to it
 * again) does not send the attempts the first is sending: it waits for their outcomes and lends
 * them its hold, and fails with them if they went back. Meta has no
 * idempotency key; an attempt is never sent again once Meta accepted it, because the wamid is
 * written to Redis (`<prefix>:wa:acc:<attempt id>`) as soon as Meta answers, and registered in
 * `carrier_refs` through the status path; a re-handed attempt is looked up in both. The Redis key
 * lives ten minutes past the engine's record of the hand-over (`handedOver`: only a copy of the
 * job racing that record may hand the attempt again), at most the step's ttl and an hour (a
 * process that died before the record). What can still repeat a message: a crash in the moment
 * between Meta's answer and that Redis write, or a request Meta took but whose answer never came
 * (a timeout is retried).
 */
import { getEach, isCluster, type Redis } from '../../redis.js';
import type { Db } from '../../db/pool.js';
import { numberArray } from '../../db/arrays.js';
import type { Logger } from '../../logger.js';
import type { WhatsappTemplateAttempt, WhatsappTextAttempt } from '../../channels/index.js';
import { holdsJob, type AttemptState, type Carrier, type CarrierSink, type OutboundAttempt, type StatusReport } from '../types.js';
import type { ConnectionState, SenderSpec } from '../provider.js';
import type { SendOutcome } from '../http-carrier.js';
import { RedisTokenBucket } from '../smpp/token-bucket.js';
import { Semaphore } from '../../semaphore.js';
import { getOrMake } from '../../collections.js';
import type { GraphClient } from './graph.js';
import { buildTemplateMessage, buildTextMessage, checkTemplateParams, findTemplate } from './messages.js';
import { TEMPLATE_CODES, ourRefOf, retryDelayMs, throttlePauseMs } from './policy.js';
import { TemplateCache } from './templates.js';
import type { GraphSendBody, GraphTemplate } from './types.js';
import { OUTSIDE_WINDOW_INFO, lastInbound, userKey, windowKey, windowOpen, type WindowPair } from './window.js';

type WhatsappAttempt = WhatsappTextAttempt | WhatsappTemplateAttempt;

/**
 * How long an accepted wamid's key stays once the hand-over is recorded (see `handedOver`): a copy
 * of the job racing the record looks it up within seconds; ten minutes leave room for a paused
 * process.
 */
const HANDED_KEY_TTL_S = 600;

export interface WhatsappCarrierOptions {
  /** The connection's name; the carrier is `whatsapp.<connection>`. */
  connection: string;
  graph: GraphClient;
  /** Messages per second per business number, across every process. */
  perNumberMps: number;
  db: Db;
  redis: Redis;
  redisPrefix: string;
  sink: CarrierSink;
  logger: Logger;
}

/** A sender row as the carrier needs it: the business number and its token (never logged). */
interface SenderEntry {
  phoneNumberId: string;
  token: string;
  wabaId?: string;
}

/** One attempt on its way to Meta. */
interface Job {
  attempt: WhatsappAttempt;
  sender: SenderEntry;
  body: GraphSendBody;
  /** After this (unix ms) the step's ttl has passed: no further try. */
  deadline: number;
  tries: number;
  /** The first try is still to come: it is made only while the dispatch run holds its job; later ones are the carrier's own. */
  firstTry: boolean;
}

/**
 * Attempts of one `send` call waiting for a business number's cap at once, not all of them: a
 * paused process that wakes takes no token for attempts it then gives back, and a large call does
 * not queue the next seconds' tokens ahead of a priority message handed meanwhile.
 */
const PACERS_PER_NUMBER = 4;

/** The connection closed while attempts waited: they go back to the engine, which hands them again. */
export class WhatsappCarrierClosed extends Error {
  override name = 'WhatsappCarrierClosed';
}

/**
 * The dispatch run no longer holds its job (`OutboundAttempt.hold`): its attempts not sent yet go
 * back unsent; the run that took the job over hands them again.
 */
export class WhatsappHoldLapsed extends Error {
  override name = 'WhatsappHoldLapsed';
}

type Hold = NonNullable<OutboundAttempt['hold']>;

/** An attempt's first outcome in the run that sends it, for a run that hands the same attempt meanwhile. */
interface Pending {
  /** Settles once the attempt's first outcome is durable (resolves), or when it may not be (rejects). */
  done: Promise<void>;
  settle(durable: boolean): void;
  /** The holds of later runs in this process that handed the same attempt meanwhile. */
  joined: Hold[];
}

function pending(): Pending {
  let settle!: (durable: boolean) => void;
  const done = new Promise<void>((resolve, reject) => {
    settle = (durable) => (durable ? resolve() : reject(new Error('the run that was sending it failed; it is handed again')));
  });
  done.catch(() => undefined); // a rejection nobody waits for is not an error
  return { done, settle, joined: [] };
}

const senderKey = (accountId: number, sender: string): string => `${accountId}\u0000${sender}`;

export class WhatsappCarrier implements Carrier {
  readonly name: string;
  private senders = new Map<string, SenderEntry>();
  private readonly buckets = new Map<string, RedisTokenBucket>();
  private readonly templates: TemplateCache;
  /**
   * Attempts being sent by this process (the same job run twice at once sends each once: the later
   * run waits for the earlier one's outcome, and lends it its hold; see `holds`).
   */
  private readonly inFlight = new Map<number, Pending>();
  private readonly retries = new Map<number, NodeJS.Timeout>();
  /** Attempts whose hand-over the engine recorded while a try of theirs was pending here: a later acceptance keeps its key `HANDED_KEY_TTL_S`. */
  private readonly handedWhilePending = new Set<number>();
  private readonly warned = new Set<string>();
  /** Accepted sends waiting to be remembered in Redis (see `remember`). */
  private accepted: Array<{ key: string; wamid: string; ttlS: number; resolve: () => void }> = [];
  private lastError: string | null = null;
  private closed = false;

  constructor(private readonly o: WhatsappCarrierOptions) {
    this.name = `whatsapp.${o.connection}`;
    this.templates = new TemplateCache(o.graph, o.logger);
  }

  /** The connection's sender rows (credentials opened), replacing the previous ones. */
  setSenders(senders: readonly SenderSpec[]): void {
    const next = new Map<string, SenderEntry>();
    for (const s of senders) {
      const token = s.credentials.access_token;
      if (typeof token !== 'string' || token === '') continue;
      const entry: SenderEntry = { phoneNumberId: s.sender, token };
      if (typeof s.details.waba_id === 'string' && s.details.waba_id !== '') entry.wabaId = s.details.waba_id;
      next.set(senderKey(s.accountId, s.sender), entry);
    }
    this.senders = next;
  }

  state(): ConnectionState {
    return this.lastError === null ? { state: 'ready' } : { state: 'error', detail: this.lastError };
  }

  /** Retries waiting in this process (operations, tests). */
  get pendingRetries(): number {
    return this.retries.size;
  }

  async send(attempts: OutboundAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    if (this.closed) throw new WhatsappCarrierClosed(`${this.name} is closed; the attempts will be handed again`);
    const now = Date.now();
    const reports: Promise<unknown>[] = [];
    const mine: Array<{ attempt: WhatsappAttempt; sender: SenderEntry }> = [];
    const joined: Array<Promise<void>> = [];
    for (const attempt of attempts) {
      if (attempt.channel !== 'whatsapp_text' && attempt.channel !== 'whatsapp_template') {
        // A route table that sends another channel here is a configuration bug: the step fails and the flow moves on.
        reports.push(this.report(attempt, 'failed', `[3] ${attempt.channel} cannot be sent over WhatsApp`));
        continue;
      }
      // Being sent by an earlier run of this process (its job taken again while it still runs):
      // that run sends it, on this run's hold if its own lapsed, and this run waits for the outcome.
      const earlier = this.inFlight.get(attempt.attemptId);
      if (earlier !== undefined) {
        if (attempt.hold !== undefined) earlier.joined.push(attempt.hold);
        joined.push(earlier.done);
        continue;
      }
      if (this.retries.has(attempt.attemptId)) continue;
      const sender = this.senders.get(senderKey(attempt.accountId, attempt.sender));
      if (!sender) {
        // The route table had the row a moment ago; it was removed since.
        reports.push(this.report(attempt, 'rejected', `[303] No route: sender "${attempt.sender}" is not registered for whatsapp`));
        continue;
      }
      mine.push({ attempt, sender });
    }
    const own = new Map<number, Pending>();
    for (const m of mine) {
      const p = pending();
      own.set(m.attempt.attemptId, p);
      this.inFlight.set(m.attempt.attemptId, p);
    }
    try {
      const fresh = await this.skipAccepted(mine, reports);
      const open = await this.checkWindows(fresh, reports, now);
      const jobs = await this.prepare(open, reports, now);
      const gates = new Map<string, Semaphore>();
      // Every try runs to its end before the call settles (a give-back fails the call, not the others).
      const tried = await Promise.allSettled(jobs.map((job) =>
        this.deliver(job, reports, getOrMake(gates, job.sender.phoneNumberId, () => new Semaphore(PACERS_PER_NUMBER)))));
      const failed = tried.find((t) => t.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      await Promise.all(reports);
    } catch (err) {
      await Promise.allSettled(reports);
      // A later run waiting for one of these hands it again itself (its job fails and is retried;
      // what Meta took is found then and not sent twice).
      this.settleAll(own, false);
      throw err;
    }
    this.settleAll(own, true);
    // Attempts an earlier run was sending: this call is done once their outcomes are.
    await Promise.all(joined);
  }

  /**
   * The call's attempts leave `inFlight` (unless a retry of one took its place there); a later run
   * waiting for one learns whether their outcomes are durable.
   */
  private settleAll(own: ReadonlyMap<number, Pending>, durable: boolean): void {
    for (const [id, p] of own) {
      p.settle(durable);
      if (this.inFlight.get(id) === p) this.settled(id);
    }
  }

  /**
   * Whether an attempt may be sent: its dispatch run still holds its job, or a later run of this
   * process that handed it too does (`OutboundAttempt.hold`; attempts without a hold always may).
   */
  private holds(attempt: WhatsappAttempt): boolean {
    if (holdsJob(attempt)) return true;
    return this.inFlight.get(attempt.attemptId)?.joined.some((h) => h.held()) ?? false;
  }

  /**
   * Attempts handed before that Meta already accepted are not sent again: their wamid is
   * registered once more (a repeated registration changes nothing) and they are left out.
   */
  private async skipAccepted(
    list: Array<{ attempt: WhatsappAttempt; sender: SenderEntry }>, reports: Promise<unknown>[],
  ): Promise<Array<{ attempt: WhatsappAttempt; sender: SenderEntry }>> {
    const rehanded = list.filter((m) => m.attempt.rehand === true).map((m) => m.attempt.attemptId);
    if (rehanded.length === 0) return list;
    const accepted = await this.acceptedBefore(rehanded);
    if (accepted.size === 0) return list;
    const out: typeof list = [];
    for (const m of list) {
      const ref = accepted.get(m.attempt.attemptId);
      if (ref === undefined) {
        out.push(m);
        continue;
      }
      this.o.logger.info({ carrier: this.name, attemptId: m.attempt.attemptId }, 'WhatsApp attempt handed again after Meta accepted it; not sent twice');
      reports.push(this.report(m.attempt, 'sending', 'Sending', ref));
    }
    return out;
  }

  /** The wamids Meta gave these attempts: Redis first (written at once), then `carrier_refs`. */
  private async acceptedBefore(attemptIds: number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    // One key per attempt, in different slots on a Redis Cluster: MGET there is one GET per key.
    const values = await getEach(this.o.redis, attemptIds.map((id) => this.acceptedKey(id)));
    const missing: number[] = [];
    attemptIds.forEach((id, i) => {
      const v = values[i];
      if (typeof v === 'string' && v !== '') out.set(id, v);
      else missing.push(id);
    });
    if (missing.length > 0) {
      const { rows } = await this.o.db.query<{ attempt_id: string; ref: string }>(
        'SELECT attempt_id, ref FROM carrier_refs WHERE attempt_id = ANY($1::bigint[]) AND carrier = $2', [numberArray(missing), this.name]);
      for (const row of rows) out.set(Number(row.attempt_id), row.ref);
    }
    return out;
  }

  /** Free text only inside the 24-hour window: one read for the whole call. */
  private async checkWindows(
    list: Array<{ attempt: WhatsappAttempt; sender: SenderEntry }>, reports: Promise<unknown>[], now: number,
  ): Promise<Array<{ attempt: WhatsappAttempt; sender: SenderEntry }>> {
    const pairs: WindowPair[] = [];
    for (const m of list) {
      if (m.attempt.channel === 'whatsapp_text') pairs.push({ phoneNumberId: m.sender.phoneNumberId, user: userKey(m.attempt.to) });
    }
    if (pairs.length === 0) return list;
    const last = await lastInbound(this.o.db, pairs);
    const out: typeof list = [];
    for (const m of list) {
      if (m.attempt.channel === 'whatsapp_text' && !windowOpen(last.get(windowKey(m.sender.phoneNumberId, userKey(m.attempt.to))), now)) {
        reports.push(this.report(m.attempt, 'undelivered', OUTSIDE_WINDOW_INFO));
        continue;
      }
      out.push(m);
    }
    return out;
  }

  /** The request bodies; a template step whose parameters do not fit its cached template fails here. */
  private async prepare(list: Array<{ attempt: WhatsappAttempt; sender: SenderEntry }>, reports: Promise<unknown>[], now: number): Promise<Job[]> {
    const wabas = new Map<string, string>();
    for (const m of list) {
      if (m.attempt.channel === 'whatsapp_template' && m.sender.wabaId !== undefined) wabas.set(m.sender.wabaId, m.sender.token);
    }
    const cached = new Map<string, GraphTemplate[] | null>();
    await Promise.all([...wabas].map(async ([wabaId, token]) => {
      cached.set(wabaId, await this.templates.get(wabaId, token));
    }));
    const jobs: Job[] = [];
    for (const { attempt, sender } of list) {
      const ourRef = ourRefOf(attempt.attemptId);
      let body: GraphSendBody;
      if (attempt.channel === 'whatsapp_text') {
        body = buildTextMessage({ to: attempt.to, text: attempt.text, ourRef });
      } else {
        const t = attempt.template;
        const known = sender.wabaId === undefined ? null : cached.get(sender.wabaId) ?? null;
        const template = known ? findTemplate(known, t.templateName, t.language) : undefined;
        const input = {
          to: attempt.to, name: t.templateName, ourRef,
          ...(t.language !== undefined && { language: t.language }),
          ...(t.params !== undefined && { params: t.params }),
          ...(t.paramsHeader !== undefined && { paramsHeader: t.paramsHeader }),
          ...(t.paramsButtons !== undefined && { paramsButtons: t.paramsButtons }),
        };
        const misfit = template ? checkTemplateParams(template, input) : null;
        if (misfit) {
          reports.push(this.outcome(attempt, sender, misfit));
          continue;
        }
        body = buildTemplateMessage(input, template);
      }
      jobs.push({ attempt, sender, body, deadline: now + attempt.ttlMinutes * 60_000, tries: 0, firstTry: true });
    }
    return jobs;
  }

  private bucketOf(phoneNumberId: string): RedisTokenBucket {
    let bucket = this.buckets.get(phoneNumberId);
    if (!bucket) {
      bucket = new RedisTokenBucket(this.o.redis, `${this.o.redisPrefix}:wa:${phoneNumberId}:bucket`, { tps: this.o.perNumberMps });
      this.buckets.set(phoneNumberId, bucket);
    }
    return bucket;
  }

  /** A send or retry of the attempt ended here; what it left pending is forgotten unless a retry follows. */
  private settled(attemptId: number): void {
    this.inFlight.delete(attemptId);
    if (!this.retries.has(attemptId)) this.handedWhilePending.delete(attemptId);
  }

  /**
   * The hand-over is recorded: the accepted wamids' keys expire `HANDED_KEY_TTL_S` from now
   * instead of after the step's ttl and an hour (one EXPIRE each, pipelined), and a try pending
   * here that Meta takes later writes its key for as long. Not at once: a copy of the same dispatch job that read
   * the attempt as not yet handed before this record (a stalled job taken over while its first
   * run still lives) looks the key up moments after, and its report may not be in `carrier_refs`
   * yet (a status batch that went to the queue).
   */
  async handedOver(attemptIds: number[], opts: { byEarlierRun?: boolean } = {}): Promise<void> {
    const keys: string[] = [];
    for (const id of attemptIds) {
      if (this.retries.has(id) || this.inFlight.has(id)) this.handedWhilePending.add(id);
      keys.push(this.acceptedKey(id));
    }
    if (keys.length === 0) return;
    // A wamid not registered again keeps its key's longer life: it is the only record left of it.
    if (opts.byEarlierRun === true && !(await this.registerRemembered(attemptIds, keys))) return;
    try {
      if (isCluster(this.o.redis)) {
        // The keys are in different slots (nodes): one EXPIRE each, sent together.
        await Promise.all(keys.map((key) => this.o.redis.expire(key, HANDED_KEY_TTL_S)));
      } else {
        const pipeline = this.o.redis.pipeline();
        for (const key of keys) pipeline.expire(key, HANDED_KEY_TTL_S);
        const results = await pipeline.exec();
        if (results?.some(([err]) => err)) throw new Error('an EXPIRE failed');
      }
    } catch (err) {
      this.o.logger.warn({ carrier: this.name, count: keys.length, err: (err as Error).message },
        'accepted WhatsApp wamids not shortened in Redis after the hand-over; they expire after the step ttl and an hour');
    }
  }

  /**
   * The wamids still remembered of attempts an earlier run handed (it may have died between Meta's
   * answer and the registration, and Meta's statuses then moved the attempt on, so that no run
   * hands it again): registered now, so that a reply quoting one finds its message.
   */
  private async registerRemembered(attemptIds: number[], keys: string[]): Promise<boolean> {
    try {
      const wamids = await getEach(this.o.redis, keys);
      const reports: StatusReport[] = [];
      attemptIds.forEach((attemptId, i) => {
        const ref = wamids[i];
        if (typeof ref === 'string' && ref !== '') {
          reports.push({ attemptId, state: 'sending', resultInfo: 'Sending', at: Date.now(), carrier: this.name, ref });
        }
      });
      if (reports.length > 0) await this.o.sink.report(reports);
      return true;
    } catch (err) {
      this.o.logger.warn({ carrier: this.name, count: attemptIds.length, err: (err as Error).message },
        'WhatsApp wamids of an earlier run not registered again (their keys keep the step ttl and an hour); a reply quoting one is matched by the latest message');
      return false;
    }
  }

  private acceptedKey(attemptId: number): string {
    return `${this.o.redisPrefix}:wa:acc:${attemptId}`;
  }

  /**
   * Writes `<prefix>:wa:acc:<attempt id>` = wamid (shortened by `handedOver`; expires after the
   * step's ttl and an hour). The answers that arrive together (one turn of the event loop) go to
   * Redis in one pipeline.
   */
  private remember(attempt: WhatsappAttempt, wamid: string, ttlS = attempt.ttlMinutes * 60 + 3600): Promise<void> {
    return new Promise((resolve) => {
      this.accepted.push({ key: this.acceptedKey(attempt.attemptId), wamid, ttlS, resolve });
      if (this.accepted.length === 1) setImmediate(() => this.writeAccepted());
    });
  }

  private writeAccepted(): void {
    const batch = this.accepted;
    this.accepted = [];
    let written: Promise<unknown>;
    if (isCluster(this.o.redis)) {
      // The keys are in different slots (nodes): one SET each, sent together.
      written = Promise.all(batch.map((a) => this.o.redis.set(a.key, a.wamid, 'EX', a.ttlS)));
    } else {
      const pipeline = this.o.redis.pipeline();
      for (const a of batch) pipeline.set(a.key, a.wamid, 'EX', a.ttlS);
      written = pipeline.exec().then((results) => {
        if (results?.some(([err]) => err)) throw new Error('a SET failed');
      });
    }
    void written
      .catch((err: unknown) => this.o.logger.warn({ carrier: this.name, count: batch.length, err: (err as Error).message },
        'accepted WhatsApp messages not remembered in Redis (a crash now could send them again)'))
      .finally(() => {
        for (const a of batch) a.resolve();
      });
  }

  /**
   * One try: a token of the number's cap (through the call's `gate`: a few of its attempts wait for
   * tokens at once), the request, and what its answer leads to. The first try is made only while
   * the attempt's dispatch run holds its job (`holds`), read before the token and again before the
   * request: a process paused past the job's lock wakes to find the job taken over and sends
   * nothing more of it. A retry is the carrier's own (the hand-over is recorded).
   */
  private async deliver(job: Job, reports: Promise<unknown>[], gate: Semaphore | null): Promise<void> {
    const bucket = this.bucketOf(job.sender.phoneNumberId);
    const first = job.firstTry;
    job.firstTry = false;
    const ready = (): void => {
      if (this.closed) throw new WhatsappCarrierClosed(`${this.name} closed before the attempt was sent; it will be handed again`);
      if (first && !this.holds(job.attempt)) {
        throw new WhatsappHoldLapsed(`the dispatch run of attempt ${job.attempt.attemptId} no longer holds its job; it is handed again`);
      }
    };
    const token = async (): Promise<void> => {
      ready();
      await bucket.take();
      ready();
    };
    let outcome: SendOutcome;
    try {
      await (gate === null ? token() : gate.run(token));
      job.tries++;
      outcome = await this.o.graph.sendMessage(job.sender.phoneNumberId, job.sender.token, job.body);
    } catch (err) {
      if (err instanceof WhatsappCarrierClosed || err instanceof WhatsappHoldLapsed) throw err;
      // The cap's store (Redis) did not answer: tried again like a fault at Meta.
      outcome = { kind: 'retry', code: 0, info: (err as Error).message };
    }
    if (outcome.kind === 'accepted') {
      this.lastError = null;
      // Taken after the hand-over was recorded: kept as long as `handedOver` leaves the others.
      await this.remember(job.attempt, outcome.carrierRef, this.handedWhilePending.has(job.attempt.attemptId) ? HANDED_KEY_TTL_S : undefined);
    } else if (outcome.kind === 'retry') {
      if (outcome.code === 0) this.lastError = outcome.info;
      const pause = throttlePauseMs(outcome.code);
      if (pause > 0) {
        await bucket.pause(outcome.afterMs ?? pause).catch(() => undefined);
      }
      const delay = retryDelayMs(job.tries, outcome.code, outcome.afterMs);
      if (!this.closed && Date.now() + delay < job.deadline) {
        this.retryLater(job, delay);
        return;
      }
      // No time left in the step: it ends with the last answer (the carrier never took it).
      reports.push(this.report(job.attempt, 'failed', outcome.info));
      return;
    }
    reports.push(this.outcome(job.attempt, job.sender, outcome));
  }

  private retryLater(job: Job, delayMs: number): void {
    const id = job.attempt.attemptId;
    const timer = setTimeout(() => {
      this.retries.delete(id);
      if (this.closed) return;
      const reports: Promise<unknown>[] = [];
      // In `inFlight` while it runs, in place of the entry of a call still sending others.
      const retry = pending();
      this.inFlight.set(id, retry);
      void this.deliver(job, reports, null)
        .then(() => Promise.all(reports))
        .then(() => retry.settle(true), (err: unknown) => {
          retry.settle(false);
          if (!(err instanceof WhatsappCarrierClosed)) {
            this.o.logger.error({ carrier: this.name, attemptId: id, err: (err as Error).message }, 'WhatsApp retry not reported; the step ttl ends it');
          }
        })
        .finally(() => {
          if (this.inFlight.get(id) === retry) this.settled(id);
        });
    }, delayMs);
    timer.unref();
    this.retries.set(id, timer);
  }

  /** The report of a final first answer (accepted, unreachable, failed). */
  private outcome(attempt: WhatsappAttempt, sender: SenderEntry, outcome: SendOutcome): Promise<boolean | void> {
    switch (outcome.kind) {
      case 'accepted':
        return this.report(attempt, 'sending', 'Sending', outcome.carrierRef);
      case 'unreachable':
        return this.report(attempt, 'undelivered', outcome.info);
      case 'failed':
        if (outcome.config) this.warnOnce(sender, outcome.code, outcome.info);
        if (TEMPLATE_CODES.has(outcome.code) && sender.wabaId !== undefined) this.templates.invalidate(sender.wabaId);
        return this.report(attempt, 'failed', outcome.info);
      case 'retry':
        return this.report(attempt, 'failed', outcome.info);
    }
  }

  private warnOnce(sender: SenderEntry, metaCode: number, info: string): void {
    const key = `${sender.phoneNumberId} ${metaCode}`;
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.o.logger.warn({ carrier: this.name, sender: sender.phoneNumberId, graphError: info },
      'Meta refuses sends over this WhatsApp number for an account, token, template or payment problem (logged once per number and error)');
  }

  /** `ref`: the wamid Meta gave the attempt (registered with a `sending` report, which moves nothing). */
  private report(attempt: OutboundAttempt, state: AttemptState, resultInfo: string, ref?: string): Promise<boolean | void> {
    const r: StatusReport = { attemptId: attempt.attemptId, state, resultInfo, at: Date.now() };
    if (ref !== undefined) {
      r.carrier = this.name;
      r.ref = ref;
    }
    return this.o.sink.report([r], { priority: attempt.priority === true });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Pending retries are left to their steps' ttl timers (kept by the engine in Redis).
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
    this.handedWhilePending.clear();
    // Unspent leased tokens go back to the shared budget.
    await Promise.all([...this.buckets.values()].map((b) => b.close()));
    await this.o.graph.close();
  }
}
