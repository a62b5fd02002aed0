/**
 * SMS over one SMPP 3.4 connection, behind the engine's Carrier interface.
 *
 * Outbound: `send(attempts)` turns each attempt into its submit_sm PDUs (the engine already
 * planned encoding and parts, D2), queues them in two lanes (priority attempts first) and resolves
 * once every part got its submit_sm_resp and the resulting reports are queued with the engine.
 * The carrier owns the flow control in front of the session:
 *
 * - at most `window` submits unacknowledged (the session's window, kept here so the pump only
 *   hands the session PDUs it can write at once);
 * - a token per PDU from the connection's Redis token bucket (`tps`), shared by every process;
 * - the parts of one message go one after another (part n+1 only after part n was accepted), so
 *   a throttled part is retried before the next part is sent and the SMSC sees the parts in order;
 * - ESME_RTHROTTLED / ESME_RMSGQFUL pause the connection (and, through the bucket, every process
 *   on it) with a growing delay, and the same PDU goes back to the head of its lane;
 * - a submit that was written but never answered (link dropped, response timeout) is sent once
 *   more after the rebind: the SMSC may then see it twice (documented); one never written is just
 *   sent after the rebind;
 * - accepted parts are recorded in Redis, so handing the same attempt again (a dispatch job
 *   retried after a crash or a failed send) never submits an accepted part twice. The engine
 *   marks such a hand-over `rehand`; only those attempts are looked up (a first hand-over cannot
 *   have accepted parts, so it costs no Redis round trip).
 *
 * Inbound: delivery receipts become `sink.report([{carrier, ref, ...}])` and mobile-originated
 * messages (concatenated parts joined through Redis, any bind) `sink.inbound(...)`; the session
 * answers each deliver_sm only after the sink resolved (temporary error otherwise, so the SMSC
 * sends it again).
 */
import { createHash } from 'node:crypto';
import { keyGroup, type Redis } from '../../redis.js';
import { holdsJob, type AttemptState, type Carrier, type CarrierSink, type OutboundAttempt, type StatusReport } from '../types.js';
import type { SmsAttempt } from '../../channels/index.js';
import {
  SmppConnectionError,
  SmppError,
  SmppSession,
  SmppTimeoutError,
  parseSmppUrl,
  type SmppLogger,
  type SmppSessionOptions,
  type SmppSessionStats,
  type SmppState,
  type SmppUrlOptions,
  type SubmitResult,
} from './session.js';
import {
  buildSubmitSms,
  concatInfo,
  decodeUserData,
  moAddress,
  parseReceipt,
  reassembleInbound,
  type DeliverSm,
  type InboundPart,
  type MessageIdForm,
  type ParsedReceipt,
  type SubmitSmFields,
} from './pdu.js';
import { RedisTokenBucket } from './token-bucket.js';
import { SmppRedisStore, type AcceptedParts } from './redis-store.js';
import { ReceiptIds, type ReceiptIdsOptions } from './receipt-ids.js';
import { sameRef } from './id-forms.js';
import { classifySubmitStatus, statusResultInfo } from './status-codes.js';
import { SUBMIT_SAMPLE_EVERY, observeSubmit } from '../../metrics.js';

export interface CarrierLogger extends SmppLogger {
  error(obj: object, msg?: string): void;
}

const silentLogger: CarrierLogger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

export interface SmppCarrierOptions {
  /** Connection name; the carrier is `smpp.<connection>`. */
  connection: string;
  /** `smpp://…` (see parseSmppUrl), or already parsed options. */
  url: string | SmppUrlOptions;
  sink: CarrierSink;
  redis: Redis;
  /**
   * `config.redisPrefix`; every key of this carrier lives under `<prefix>:smpp:<connection>:`
   * (`{<prefix>:smpp:<connection>}:` on a Redis Cluster: one hash tag per connection, see redis-store.ts).
   */
  redisPrefix: string;
  /**
   * Connection whose name receipts are reported under and whose id index they read. Default: this
   * one. A receiver-only bind sets it to its transmitter's connection (same SMSC and system_id).
   */
  refNamespace?: string;
  logger?: CarrierLogger;
  /** Session option overrides (tests use a fast reconnect). */
  session?: Partial<SmppSessionOptions>;
  /** How long the link may stay unbound before queued submits are given back to the engine (send() rejects); default 60 000 ms. */
  stallTimeoutMs?: number;
  /** Pause after ESME_RTHROTTLED / ESME_RMSGQFUL: starts at initialMs (200), doubles per consecutive episode, up to maxMs (5000). */
  throttleBackoff?: { initialMs?: number; maxMs?: number };
  /** Busy answers one PDU may get before its attempt ends `failed`; default 100. */
  maxRetries?: number;
  /** With `auto` id forms: how the SMSC's id form is learned (see receipt-ids.ts); tests shorten the grace. */
  idForms?: Pick<ReceiptIdsOptions, 'minVotes' | 'voteGraceMs' | 'parkedMaxMs'>;
}

export interface SmppCarrierStats extends SmppSessionStats {
  /** Attempts waiting in the carrier's lanes (the session's own `queued` is almost always 0). */
  waiting: number;
  carrierInFlight: number;
  pausedForMs: number;
  submitted: number;
  accepted: number;
  busy: number;
  resent: number;
  receipts: number;
  inbound: number;
}

/** The attempt was not (completely) submitted and should be handed again later; send() rejects. */
export class SmppCarrierError extends SmppError {
  override name = 'SmppCarrierError';
}

type WorkOutcome = { kind: 'done' } | { kind: 'give-back'; error: Error };

interface Work {
  attempt: SmsAttempt;
  fields: SubmitSmFields[];
  /** Part indexes still to submit, in order. */
  pending: number[];
  priority: boolean;
  /**
   * Never written twice (the attempt's lane is at-most-once): each part is recorded in Redis
   * before it is written, and a part written without an answer is not sent again.
   */
  atMostOnce: boolean;
  /** Written-but-unanswered retries used by the current part (at most 1). */
  unanswered: number;
  /** Busy answers (throttled / queue full) for the current part. */
  busy: number;
  /**
   * Parts that reached the SMSC before the rest (accepted, or written without an answer): the
   * attempt is reported `sent` only with its last part (`accepted`), and `sent` ahead of a
   * failure that ends it midway (`end`).
   */
  partsOut: number;
  /** A part was written without an answer and not sent again (at-most-once): the `sent` report says so. */
  unconfirmed: boolean;
  /** Where in `reports` the report that settles the attempt's hand-over is (its last part's, or its failure); -1 before. */
  settledAt: number;
  reports: Promise<unknown>[];
  finish(outcome: WorkOutcome): void;
}

/**
 * FIFO with cheap removal at the head, and items given back (a retried PDU, the next part of a
 * started message) placed ahead of every new one, in the order they were given back: the window
 * a dropped link gives back goes out again in the order it was first sent.
 */
class Lane<T> {
  /** Given back; at most a window or so, so shifting the array is cheap. */
  private front: T[] = [];
  private items: T[] = [];
  private start = 0;

  get length(): number {
    return this.front.length + this.items.length - this.start;
  }

  push(item: T): void {
    this.items.push(item);
  }

  /** Gives an item back: ahead of the new ones, behind those given back before it. */
  unshift(item: T): void {
    this.front.push(item);
  }

  /** The item `shift` would return, left in place. */
  peek(): T | undefined {
    return this.front.length > 0 ? this.front[0] : this.items[this.start];
  }

  shift(): T | undefined {
    if (this.front.length > 0) return this.front.shift();
    if (this.start >= this.items.length) return undefined;
    const item = this.items[this.start];
    this.items[this.start] = undefined as T;
    this.start++;
    if (this.start > 1024 && this.start * 2 > this.items.length) {
      this.items = this.items.slice(this.start);
      this.start = 0;
    }
    return item;
  }

  drain(): T[] {
    const all = [...this.front, ...this.items.slice(this.start)];
    this.front = [];
    this.items = [];
    this.start = 0;
    return all;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** result_info of an attempt with a part written to the link that got no answer and was not sent again. */
const UNCONFIRMED_INFO = 'Sent (unconfirmed: the SMSC did not answer and it was not sent again)';

/**
 * Forgets an attempt's running send once it is done (bound per attempt rather than an arrow made
 * per attempt: docs/architecture.md, "Hot loops").
 */
function forgetActive(active: Map<number, Promise<WorkOutcome>>, attemptId: number, done: Promise<WorkOutcome>): void {
  if (active.get(attemptId) === done) active.delete(attemptId);
}

/**
 * The concatenation reference of an attempt's parts: derived from its id, so a re-hand in any
 * process resumes with the reference of the parts already accepted, and consecutive attempts
 * (one per recipient) get different references.
 */
function concatRefOf(attemptId: number): number {
  return attemptId & 0xff;
}

/** What a receipt that changes nothing is handled with. */
const SETTLED: Promise<unknown> = Promise.resolve();

/** No parts (an attempt's unconfirmed parts, almost always): shared rather than made per attempt. */
const NO_PARTS: ReadonlySet<number> = new Set<number>();

/** Marks a promise as handled now (it is awaited later); avoids unhandled-rejection crashes. */
function held<T>(promise: Promise<T>): Promise<T> {
  promise.catch(ignore);
  return promise;
}

/** A rejection handled elsewhere (see `held`). */
function ignore(): void {}

/** result_info of a receipt: `[0] Delivered`, `[1] Undelivered (UNDELIV err:001)`, `[2] Rejected (REJECTD err:002)`. */
export function receiptResultInfo(r: ParsedReceipt): string {
  if (r.state === 'delivered') return '[0] Delivered';
  const err = r.err !== null ? `err:${r.err}` : '';
  const detail = r.stat && err ? `${r.stat} ${err}` : r.stat || err;
  switch (r.state) {
    case 'undelivered':
      return `[1] Undelivered${detail ? ` (${detail})` : ''}`;
    case 'rejected':
      return `[2] Rejected${detail ? ` (${detail})` : ''}`;
    default:
      return detail;
  }
}

/** result_info when a PDU cannot even be built (bad sender, destination or text). */
function localRejectInfo(err: Error): string {
  if (/sender/i.test(err.message)) return statusResultInfo(0x0a, err.message);
  if (/destination/i.test(err.message)) return statusResultInfo(0x0b, err.message);
  return statusResultInfo(0x01, err.message);
}

export class SmppCarrier implements Carrier {
  readonly name: string;
  /** `send` resolves after every attempt's submit responses (or its failure) were reported. */
  readonly settlesOnSend = true;
  readonly connection: string;
  /** Carrier name receipts are reported under (`smpp.<refNamespace>`). */
  readonly refCarrier: string;
  readonly window: number;
  readonly tps: number | null;
  readonly bindMode: SmppUrlOptions['bindMode'];
  private readonly session: SmppSession;
  private readonly sink: CarrierSink;
  private readonly logger: CarrierLogger;
  private readonly store: SmppRedisStore;
  private readonly refStore: SmppRedisStore;
  private readonly bucket: RedisTokenBucket | null;
  private readonly submitIdForm: MessageIdForm;
  /** How the SMSC's national numbers read (SMPP_URL `country`), or null. */
  private readonly country: string | null;
  /** Which ref a receipt names (learns the SMSC's id form with `auto`). */
  private readonly receiptIds: ReceiptIds;
  private readonly stallTimeoutMs: number;
  private readonly throttleInitialMs: number;
  private readonly throttleMaxMs: number;
  private readonly maxRetries: number;

  private readonly priorityLane = new Lane<Work>();
  private readonly normalLane = new Lane<Work>();
  private readonly active = new Map<number, Promise<WorkOutcome>>();
  private inFlight = 0;
  private pumping = false;
  private wakeTimer: NodeJS.Timeout | null = null;
  private stallTimer: NodeJS.Timeout | null = null;
  private pausedUntil = 0;
  private throttleStreak = 0;
  private unboundSince: number | null = Date.now();
  /** Since when the tps limiter (Redis) could not be reached: submits wait like on a link down. */
  private limiterDownSince: number | null = null;
  private closed = false;
  private closePromise: Promise<void> | null = null;
  private readonly counters = { submitted: 0, accepted: 0, busy: 0, resent: 0, receipts: 0, inbound: 0 };

  constructor(options: SmppCarrierOptions) {
    const url = typeof options.url === 'string' ? parseSmppUrl(options.url) : options.url;
    this.connection = options.connection;
    this.name = `smpp.${options.connection}`;
    const namespace = options.refNamespace ?? options.connection;
    this.refCarrier = `smpp.${namespace}`;
    this.sink = options.sink;
    this.logger = options.logger ?? silentLogger;
    this.window = url.window;
    this.tps = url.tps;
    this.bindMode = url.bindMode;
    this.submitIdForm = url.submitIdForm;
    this.country = url.country;
    this.stallTimeoutMs = options.stallTimeoutMs ?? 60_000;
    this.throttleInitialMs = options.throttleBackoff?.initialMs ?? 200;
    this.throttleMaxMs = options.throttleBackoff?.maxMs ?? 5_000;
    this.maxRetries = options.maxRetries ?? 100;
    const base = (name: string) => keyGroup(options.redis, `${options.redisPrefix}:smpp:${name}`);
    this.store = new SmppRedisStore(options.redis, base(options.connection));
    this.refStore = namespace === options.connection ? this.store : new SmppRedisStore(options.redis, base(namespace));
    // The learned id form belongs to the SMSC (and account) the connection points at. It is in the
    // namespace's group: a sending connection is its own namespace, so its index script's keys
    // (idform and id:<ref>, INDEX_IDS_LUA) share one hash tag.
    const smsc = createHash('sha1').update(`${url.host}:${url.port}:${url.systemId}`).digest('hex').slice(0, 16);
    this.store.idFormKey = this.refStore.idFormKey = `${base(namespace)}:idform:${smsc}`;
    this.receiptIds = new ReceiptIds({
      submitForm: url.submitIdForm,
      receiptForm: url.receiptIdForm,
      store: this.refStore,
      report: (reports) => this.sink.report(reports),
      carrier: this.refCarrier,
      logger: this.logger,
      ...options.idForms,
      ...(this.sink.matchRefs && { matchRefs: (refs: string[]) => this.sink.matchRefs!(this.refCarrier, refs) }),
    });
    this.store.onIdForm = (value) => this.receiptIds.adopt(value);
    this.bucket = url.tps ? new RedisTokenBucket(options.redis, `${base(options.connection)}:tps`, { tps: url.tps }) : null;

    this.session = new SmppSession({
      host: url.host,
      port: url.port,
      tls: url.tls,
      systemId: url.systemId,
      password: url.password,
      systemType: url.systemType,
      bindMode: url.bindMode,
      window: url.window,
      // The cap is the shared bucket above; a per-process spacing would multiply it by N processes.
      tps: null,
      responseTimeoutMs: url.responseTimeoutMs,
      enquireLinkIntervalMs: url.enquireLinkIntervalMs,
      addrTon: url.addrTon,
      addrNpi: url.addrNpi,
      addressRange: url.addressRange,
      queueTimeoutMs: this.stallTimeoutMs,
      logger: this.logger,
      ...options.session,
    });
    this.session.on('state', (state) => this.onState(state));
    this.session.onDeliver((pdu) => this.onDeliver(pdu));
  }

  /** Connects and binds in the background (rebinding on its own after a drop). */
  start(): this {
    this.session.start();
    return this;
  }

  get state(): SmppState {
    return this.session.state;
  }

  /** Why the link was last lost or refused, in words, or null. */
  get lastError(): string | null {
    return this.session.lastError;
  }

  get stats(): SmppCarrierStats {
    return {
      ...this.session.stats,
      ...this.counters,
      waiting: this.priorityLane.length + this.normalLane.length,
      carrierInFlight: this.inFlight,
      pausedForMs: Math.max(0, this.pausedUntil - Date.now()),
    };
  }

  waitUntilBound(timeoutMs?: number): Promise<void> {
    return this.session.waitUntilBound(timeoutMs);
  }

  // -------------------------------------------------------------------------------------------
  // Outbound
  // -------------------------------------------------------------------------------------------

  async send(attempts: OutboundAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    if (this.closed) throw new SmppCarrierError(`${this.name} is closed; the attempts will be handed again`);
    if (this.bindMode === 'receiver') throw new SmppCarrierError(`${this.name} is a receiver bind and cannot send`);

    // An attempt already being sent here (the same job run twice) joins the running one.
    const joined: Promise<WorkOutcome>[] = [];
    const mine: Array<{ attempt: SmsAttempt; done: Promise<WorkOutcome>; resolve(outcome: WorkOutcome): void }> = [];
    const refused: StatusReport[] = [];
    for (const attempt of attempts) {
      if (attempt.channel !== 'sms') {
        // A route table that sends another channel here is a configuration bug: the step fails and the flow moves on.
        refused.push({ attemptId: attempt.attemptId, state: 'failed', resultInfo: `[3] ${attempt.channel} cannot be sent over SMPP`, at: Date.now() });
        continue;
      }
      const running = this.active.get(attempt.attemptId);
      if (running) {
        joined.push(running);
        continue;
      }
      let resolve!: (outcome: WorkOutcome) => void;
      const done = new Promise<WorkOutcome>((r) => (resolve = r));
      this.active.set(attempt.attemptId, done);
      void done.then(forgetActive.bind(null, this.active, attempt.attemptId, done));
      mine.push({ attempt, done, resolve });
    }

    // Only an attempt handed before can have accepted parts: a first hand-over skips the lookup.
    let accepted = new Map<number, AcceptedParts>();
    let handed = new Set<number>();
    try {
      const rehanded: Array<{ attemptId: number; partCount: number }> = [];
      for (const m of mine) {
        if (m.attempt.rehand === true) rehanded.push({ attemptId: m.attempt.attemptId, partCount: m.attempt.parts.length });
      }
      if (rehanded.length > 0) ({ accepted, handed } = await this.acceptedBefore(rehanded));
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      for (const m of mine) m.resolve({ kind: 'give-back', error });
      throw error;
    }

    const reports: Promise<unknown>[] = [];
    if (refused.length > 0) reports.push(held(this.sink.report(refused)));
    const works: Work[] = [];
    // Attempts a re-hand found wholly accepted before: settled by the report of their parts, at `at` in `reports`.
    const settledBefore: Array<{ attempt: SmsAttempt; partCount: number; at: number }> = [];
    const outcomes: Promise<WorkOutcome>[] = [...joined];
    const now = Date.now();
    for (const { attempt, done, resolve } of mine) {
      outcomes.push(done);
      if (handed.has(attempt.attemptId)) {
        // Another run of the same job (one BullMQ took for stalled) finished it: nothing to do.
        this.logger.info({ carrier: this.name, attemptId: attempt.attemptId }, 'SMPP attempt handed again after its hand-over was recorded; skipped');
        resolve({ kind: 'done' });
        continue;
      }
      const prior = accepted.get(attempt.attemptId);
      const concatRef = prior?.concatRef ?? concatRefOf(attempt.attemptId);
      let fields: SubmitSmFields[];
      try {
        fields = buildSubmitSms({
          destination: attempt.to,
          sender: attempt.sender,
          encoding: attempt.encoding,
          parts: attempt.parts,
          validityMinutes: attempt.ttlMinutes,
          reference: concatRef,
        });
      } catch (err) {
        const info = localRejectInfo(err instanceof Error ? err : new Error(String(err)));
        reports.push(held(this.sink.report([{ attemptId: attempt.attemptId, state: 'rejected', resultInfo: info, at: now }], { priority: attempt.priority === true })));
        resolve({ kind: 'done' });
        continue;
      }
      // Parts written before without an answer (a crash, a link lost): an at-most-once attempt does
      // not send them again, it reports them sent but unconfirmed; an at-least-once one sends them.
      const unconfirmed: ReadonlySet<number> = (attempt.atMostOnce === true && prior?.unanswered) || NO_PARTS;
      const pending: number[] = [];
      for (let i = 0; i < fields.length; i++) {
        if (!prior?.parts.has(i) && !unconfirmed.has(i)) pending.push(i);
      }
      if (prior) {
        // Parts the SMSC already accepted (an earlier hand-over): their refs registered again, never
        // resubmitted; the attempt is `sent` now only if no part is left to send.
        this.logger.info({ carrier: this.name, attemptId: attempt.attemptId, parts: [...prior.parts.keys()], unconfirmed: [...unconfirmed] },
          'SMPP attempt handed again; skipping accepted parts');
        const done = pending.length === 0;
        const again: StatusReport[] = [];
        for (const [part, ref] of prior.parts) {
          // Not done: only a part with a ref has something to register.
          if (done || ref !== '') again.push(this.sentReport(attempt.attemptId, part, fields.length, ref, now, done ? 'sent' : 'sending'));
        }
        if (done) for (const part of unconfirmed) again.push(this.unconfirmedReport(attempt.attemptId, part, fields.length, now));
        if (again.length > 0) {
          const at = reports.push(held(this.sink.report(again, { priority: attempt.priority === true }))) - 1;
          if (done) settledBefore.push({ attempt, partCount: fields.length, at });
        }
      }
      if (pending.length === 0) {
        resolve({ kind: 'done' });
        continue;
      }
      works.push({
        attempt,
        fields,
        pending,
        priority: attempt.priority === true,
        atMostOnce: attempt.atMostOnce === true,
        unanswered: 0,
        busy: 0,
        partsOut: fields.length - pending.length,
        unconfirmed: unconfirmed.size > 0,
        settledAt: -1,
        reports,
        finish: resolve,
      });
    }
    for (const work of works) (work.priority ? this.priorityLane : this.normalLane).push(work);
    if (works.length > 0) {
      this.ensureStallTimer();
      this.pump();
    }

    const results = await Promise.all(outcomes);
    const reported = await Promise.all(reports);
    this.forgetSettled(works, settledBefore, reported);
    let givenBack = 0;
    let firstError: Error | null = null;
    for (const r of results) {
      if (r.kind !== 'give-back') continue;
      givenBack++;
      firstError ??= r.error;
    }
    if (firstError) {
      throw new SmppCarrierError(
        `${givenBack} of ${attempts.length} attempts were not submitted over ${this.name} (${firstError.message}); they will be handed again`,
      );
    }
  }

  /**
   * What the SMSC accepted of attempts handed over before: the parts recorded in Redis, and those
   * whose refs the engine registered (a Redis that lost its data, or a re-hand after the record
   * expired, would otherwise send them again); and which of them Postgres already records as
   * handed over, which another run of the same job finished meanwhile.
   *
   * Redis first, then Postgres: a run that finishes a hand-over commits it in Postgres before it
   * forgets its record in Redis (forgetSettled), so a record that was forgotten was committed
   * before the Postgres read begins, and that read sees the attempt handed. Read the other way
   * round (or at once), Postgres could be read before that commit and Redis after the forgetting,
   * and the accepted parts would be sent again. Both miss a record that expired (6 h) before its
   * hand-over was committed, and parts another connection accepted (docs/smpp.md).
   */
  private async acceptedBefore(rehanded: Array<{ attemptId: number; partCount: number }>): Promise<{ accepted: Map<number, AcceptedParts>; handed: Set<number> }> {
    const accepted = await this.store.acceptedParts(rehanded);
    const prior = await this.sink.priorHandOvers?.(this.name, rehanded.map((r) => r.attemptId));
    if (!prior) return { accepted, handed: new Set() };
    for (const { attemptId, part, ref } of prior.parts) {
      let entry = accepted.get(attemptId);
      if (!entry) {
        entry = { concatRef: null, parts: new Map(), unanswered: new Set() };
        accepted.set(attemptId, entry);
      }
      if (!entry.parts.has(part)) entry.parts.set(part, ref);
      entry.unanswered.delete(part);
    }
    return { accepted, handed: new Set(prior.handed) };
  }

  /**
   * Attempts whose settling report was applied (not only queued) are recorded as handed over in
   * Postgres: the engine never hands them again, so their accepted parts need not be kept.
   */
  private forgetSettled(works: Work[], settledBefore: Array<{ attempt: SmsAttempt; partCount: number; at: number }>, reported: unknown[]): void {
    const settled: Array<{ attemptId: number; partCount: number; atMostOnce: boolean }> = [];
    for (const w of works) {
      if (w.settledAt >= 0 && reported[w.settledAt] === true) {
        settled.push({ attemptId: w.attempt.attemptId, partCount: w.fields.length, atMostOnce: w.atMostOnce });
      }
    }
    for (const s of settledBefore) {
      if (reported[s.at] === true) settled.push({ attemptId: s.attempt.attemptId, partCount: s.partCount, atMostOnce: s.attempt.atMostOnce === true });
    }
    if (settled.length === 0) return;
    // Not awaited: what is not forgotten expires (ATTEMPT_TTL_S).
    this.store.forgetAccepted(settled).catch((err: unknown) =>
      this.logger.warn({ err: (err as Error).message, carrier: this.name, attempts: settled.length }, 'accepted SMPP parts not forgotten; they expire'));
  }

  /**
   * A part the SMSC accepted: `sent` moves the attempt (the last part of it), `sending` only
   * registers the part's ref (the engine moves nothing to `sending`).
   */
  private sentReport(attemptId: number, part: number, partCount: number, ref: string, at: number, state: 'sent' | 'sending' = 'sent'): StatusReport {
    // Two literals rather than a conditional spread (one per accepted part: docs/architecture.md, "Hot loops").
    return ref !== ''
      ? { attemptId, carrier: this.name, ref, part, partCount, state, resultInfo: 'Sent', at }
      : { attemptId, carrier: this.name, part, partCount, state, resultInfo: 'Sent', at };
  }

  /**
   * A part written to the link that got no answer and is not written again (at-most-once): `sent`
   * with no carrier ref, so no receipt can name it.
   */
  private unconfirmedReport(attemptId: number, part: number, partCount: number, at: number): StatusReport {
    const report = this.sentReport(attemptId, part, partCount, '', at);
    report.resultInfo = UNCONFIRMED_INFO;
    return report;
  }

  /** Why the pump cannot hand over a PDU now: null = it can; a number = paused for that many ms. */
  private blocked(): 'empty' | 'unbound' | 'window' | 'closed' | number | null {
    if (this.closed) return 'closed';
    if (this.priorityLane.length + this.normalLane.length === 0) return 'empty';
    if (this.session.state !== 'bound') return 'unbound';
    if (this.inFlight >= this.window) return 'window';
    const wait = this.pausedUntil - Date.now();
    return wait > 0 ? wait : null;
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    void this.pumpLoop().then(
      () => {
        this.pumping = false;
        // Something may have changed between the loop's last check and now.
        if (this.blocked() === null) this.pump();
      },
      (err: unknown) => {
        this.pumping = false;
        this.logger.error({ err, carrier: this.name }, 'SMPP pump failed');
        // Again after a pause, not from this callback: a loop that failed before its first wait
        // would otherwise fail again at once, in promise callbacks that never yield to I/O.
        this.wakeAfter(100);
      },
    );
  }

  private async pumpLoop(): Promise<void> {
    for (;;) {
      const reason = this.blocked();
      if (reason !== null) {
        if (typeof reason === 'number') this.wakeAfter(reason);
        return;
      }
      // A work whose dispatch run no longer holds its job goes back before it costs a token.
      const head = this.priorityLane.peek() ?? this.normalLane.peek();
      if (head !== undefined && !holdsJob(head.attempt)) {
        (this.priorityLane.peek() === head ? this.priorityLane : this.normalLane).shift();
        this.giveBackUnheld(head);
        continue;
      }
      // A leased token costs no Redis round trip; without one, wait for the next lease.
      if (this.bucket && !this.bucket.tryTake()) {
        try {
          await this.bucket.take();
          if (this.limiterDownSince !== null) this.logger.info({ carrier: this.name }, 'SMPP rate limiter reachable again');
          this.limiterDownSince = null;
        } catch (err) {
          // Once per outage; submits wait (never past the cap) and the stall timer gives them back.
          if (this.limiterDownSince === null) this.logger.warn({ err, carrier: this.name }, 'SMPP rate limiter unavailable; submits wait');
          this.limiterDownSince ??= Date.now();
          await sleep(500);
          continue;
        }
        // A token spent while the link dropped or paused is lost: only throughput suffers.
        if (this.blocked() !== null) continue;
      }
      // Picked only now, so a priority attempt that arrived during the wait goes first.
      const work = this.priorityLane.shift() ?? this.normalLane.shift();
      if (work) this.submitNext(work);
    }
  }

  /**
   * A work whose dispatch run no longer holds its job (`OutboundAttempt.hold`: its process was
   * paused or cut off from Redis past the job's lock) is given back unsent: the run that took the
   * job over resumes from what was accepted, which Redis keeps (nothing is forgotten of it here).
   */
  private giveBackUnheld(work: Work): void {
    work.finish({ kind: 'give-back', error: new SmppCarrierError(`the dispatch run of attempt ${work.attempt.attemptId} no longer holds its job; it is handed again`) });
  }

  private wakeAfter(ms: number): void {
    if (this.wakeTimer) return;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.pump();
    }, Math.max(1, Math.ceil(ms)));
  }

  private submitNext(work: Work): void {
    const part = work.pending[0];
    const fields = part === undefined ? undefined : work.fields[part];
    if (part === undefined || !fields) {
      work.finish({ kind: 'done' });
      return;
    }
    if (!holdsJob(work.attempt)) {
      // The hold lapsed while the pump waited for a token.
      this.giveBackUnheld(work);
      return;
    }
    this.inFlight++;
    this.counters.submitted++;
    void this.submitPart(work, part, fields);
  }

  // A method rather than arrows per PDU (docs/architecture.md, "Hot loops").
  private async submitPart(work: Work, part: number, fields: SubmitSmFields): Promise<void> {
    let recorded: Promise<unknown> | null = null;
    try {
      let result: SubmitResult;
      // One submit in SUBMIT_SAMPLE_EVERY is timed for the latency histogram (no clock read per PDU).
      const timed = this.counters.submitted % SUBMIT_SAMPLE_EVERY === 1 ? performance.now() : 0;
      try {
        // At-most-once: what is about to be written is recorded first (a crash after the write
        // then leaves a mark that stops a re-hand from writing it again). Not recorded, not written.
        if (work.atMostOnce && !(await this.markWritten(work, part))) return;
        result = await this.session.submit(fields);
      } catch (err) {
        this.onSubmitError(work, part, err);
        return;
      }
      if (timed !== 0) observeSubmit('smpp', this.connection, (performance.now() - timed) / 1000);
      recorded = this.onSubmitResult(work, part, result);
    } catch (err) {
      this.logger.error({ err, carrier: this.name, attemptId: work.attempt.attemptId }, 'SMPP submit handling failed');
      work.finish({ kind: 'give-back', error: err instanceof Error ? err : new Error(String(err)) });
    } finally {
      // An accepted part keeps its window slot until Redis has its record: a crash then repeats
      // at most `window` PDUs per process (written, and not yet recorded as accepted). Freed at
      // once, a slot could carry a new PDU while the answer before it was still unrecorded: up to
      // a window unanswered and another answered but unrecorded, both sent again by the re-hand.
      if (recorded !== null) {
        try {
          await recorded;
        } catch {
          // its failure is the report's (held, and awaited by send())
        }
      }
      this.inFlight--;
      this.pump();
    }
  }

  private async markWritten(work: Work, part: number): Promise<boolean> {
    try {
      await this.store.recordWritten(work.attempt.attemptId, part);
      return true;
    } catch (err) {
      work.finish({ kind: 'give-back', error: err instanceof Error ? err : new Error(String(err)) });
      return false;
    }
  }

  private requeue(work: Work): void {
    if (this.closed) {
      work.finish({ kind: 'give-back', error: new SmppCarrierError(`${this.name} closed`) });
      return;
    }
    // Head of its lane: a retried PDU and the next part of a started message do not queue again.
    (work.priority ? this.priorityLane : this.normalLane).unshift(work);
    this.ensureStallTimer();
  }

  /** What the SMSC answered a part; for an accepted one, its record in Redis (`accepted`). */
  private onSubmitResult(work: Work, part: number, result: SubmitResult): Promise<unknown> | null {
    const status = result.commandStatus;
    const kind = classifySubmitStatus(status);
    if (kind === 'ok') {
      this.counters.accepted++;
      if (Date.now() >= this.pausedUntil) this.throttleStreak = 0;
      work.pending.shift();
      work.unanswered = 0;
      work.busy = 0;
      const recorded = this.accepted(work, part, result.messageId);
      if (work.pending.length === 0) work.finish({ kind: 'done' });
      else this.requeue(work);
      return recorded;
    }
    if (kind === 'retry') {
      this.counters.busy++;
      this.slowDown(status);
      work.busy++;
      if (work.busy > this.maxRetries) {
        this.end(work, 'failed', statusResultInfo(status, `still refused after ${this.maxRetries} retries`));
        return null;
      }
      this.requeue(work);
      return null;
    }
    this.end(work, kind, statusResultInfo(status));
    return null;
  }

  private onSubmitError(work: Work, part: number, err: unknown): void {
    const sent = err instanceof SmppConnectionError || err instanceof SmppTimeoutError ? err.sent : null;
    if (sent === false) {
      // Never written: send it after the rebind, no duplicate possible.
      this.requeue(work);
      return;
    }
    if (sent === true) {
      if (this.closed) {
        work.finish({ kind: 'give-back', error: err as Error });
        return;
      }
      if (work.atMostOnce) {
        // Written but unanswered, and never written twice: reported sent but unconfirmed.
        this.logger.warn({ carrier: this.name, attemptId: work.attempt.attemptId, part, reason: (err as Error).message },
          'SMPP submit_sm unanswered; not sent again (at-most-once lane)');
        work.pending.shift();
        work.partsOut++;
        work.unconfirmed = true;
        if (work.pending.length === 0) {
          const report = this.unconfirmedReport(work.attempt.attemptId, part, work.fields.length, Date.now());
          work.settledAt = work.reports.push(held(this.sink.report([report], { priority: work.priority }))) - 1;
          work.finish({ kind: 'done' });
        } else {
          this.requeue(work);
        }
        return;
      }
      if (work.unanswered < 1) {
        // Written but unanswered: the SMSC may have taken it. Sent once more (documented duplicate risk).
        work.unanswered++;
        this.counters.resent++;
        this.logger.warn(
          { carrier: this.name, attemptId: work.attempt.attemptId, part, reason: (err as Error).message },
          'SMPP submit_sm unanswered; sending it once more after the rebind (the SMSC may see it twice)',
        );
        this.requeue(work);
        return;
      }
      this.end(work, 'failed', statusResultInfo(0x08, 'no submit_sm_resp from the SMSC'));
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    this.logger.error({ carrier: this.name, attemptId: work.attempt.attemptId, part, err: message }, 'SMPP submit_sm could not be sent');
    this.end(work, 'failed', statusResultInfo(0xff, message));
  }

  /** Ends an attempt with a final state reported by attempt id. */
  private end(work: Work, state: 'rejected' | 'failed', resultInfo: string): void {
    const at = Date.now();
    const ending: StatusReport = { attemptId: work.attempt.attemptId, state, resultInfo, at };
    // Earlier parts reached the SMSC: the attempt was sent (and stays charged, D3), then failed.
    const reports = work.partsOut > 0 ? [this.partsOutReport(work, at), ending] : [ending];
    const index = work.reports.push(held(this.sink.report(reports, { priority: work.priority }))) - 1;
    // What Redis may hold of it: accepted parts, or the mark of a part written (at-most-once).
    if (work.partsOut > 0 || work.atMostOnce) work.settledAt = index;
    work.finish({ kind: 'done' });
  }

  /** `sent` for an attempt some of whose parts reached the SMSC (no ref: theirs are registered). */
  private partsOutReport(work: Work, at: number): StatusReport {
    return { attemptId: work.attempt.attemptId, state: 'sent', resultInfo: work.unconfirmed ? UNCONFIRMED_INFO : 'Sent', at };
  }

  private accepted(work: Work, part: number, messageId: string | undefined): Promise<void> {
    const attemptId = work.attempt.attemptId;
    const ref = messageId ? sameRef(messageId, this.submitIdForm) : '';
    if (ref === '') {
      this.logger.warn({ carrier: this.name, attemptId, part }, 'SMPP submit_sm_resp without message_id; its receipt cannot be matched');
    }
    // Only the last part moves the attempt to `sent`: a hand-over that stops midway (a link that
    // stays down, a connection replaced, a crash) leaves it `sending`, so the engine hands it
    // again and the parts not yet accepted are sent then (the accepted ones are skipped, above).
    const last = work.pending.length === 0;
    const report = this.sentReport(attemptId, part, work.fields.length, ref, Date.now(), last ? 'sent' : 'sending');
    if (last && work.unconfirmed) report.resultInfo = UNCONFIRMED_INFO;
    work.partsOut++;
    // A part without an id, not the last, has nothing to register.
    if (last) work.settledAt = work.reports.push(held(this.sink.report([report], { priority: work.priority }))) - 1;
    else if (ref !== '') work.reports.push(held(this.sink.report([report], { priority: work.priority })));
    const recorded = held(
      this.store.recordAccepted({
        attemptId,
        part,
        ref,
        index: this.receiptIds.accepted(ref),
        idTtlSeconds: Math.ceil(work.attempt.ttlMinutes * 60) + 86_400,
      }),
    );
    work.reports.push(recorded);
    return recorded;
  }

  /** ESME_RTHROTTLED / ESME_RMSGQFUL: pause this connection (every process on it) with a growing delay. */
  private slowDown(status: number): void {
    const now = Date.now();
    if (now >= this.pausedUntil) this.throttleStreak++;
    const delay = Math.min(this.throttleMaxMs, this.throttleInitialMs * 2 ** Math.max(0, this.throttleStreak - 1));
    if (now + delay <= this.pausedUntil) return;
    this.pausedUntil = now + delay;
    this.logger.info({ carrier: this.name, status: statusResultInfo(status), pauseMs: delay }, 'SMSC busy; slowing down');
    if (this.bucket) {
      this.bucket.pause(delay).catch((err: unknown) => this.logger.warn({ err, carrier: this.name }, 'could not share the SMPP pause'));
    }
  }

  private onState(state: SmppState): void {
    if (state === 'bound') {
      this.unboundSince = null;
      this.pump();
    } else if (this.unboundSince === null) {
      this.unboundSince = Date.now();
    }
  }

  /** While PDUs wait, give them back to the engine when the link stays down for stallTimeoutMs. */
  private ensureStallTimer(): void {
    if (this.stallTimer || this.closed) return;
    const every = Math.max(50, Math.min(1_000, Math.floor(this.stallTimeoutMs / 4)));
    this.stallTimer = setInterval(() => {
      const queued = this.priorityLane.length + this.normalLane.length;
      if (queued === 0) {
        if (this.stallTimer) clearInterval(this.stallTimer);
        this.stallTimer = null;
        return;
      }
      const since = Math.min(this.unboundSince ?? Infinity, this.limiterDownSince ?? Infinity);
      if (Date.now() - since < this.stallTimeoutMs) return;
      const error = new SmppCarrierError(`${this.name} ${this.unboundSince === since ? 'not bound' : 'without its tps limiter'} for ${Math.round((Date.now() - since) / 1000)} s`);
      this.logger.warn({ carrier: this.name, queued }, 'SMPP link down too long; giving queued attempts back to the engine');
      for (const work of [...this.priorityLane.drain(), ...this.normalLane.drain()]) work.finish({ kind: 'give-back', error });
    }, every);
    this.stallTimer.unref();
  }

  // -------------------------------------------------------------------------------------------
  // Inbound: receipts and MO
  // -------------------------------------------------------------------------------------------

  private onDeliver(pdu: DeliverSm): Promise<unknown> {
    const receipt = parseReceipt(pdu);
    return receipt ? this.onReceipt(receipt) : this.onMo(pdu);
  }

  private onReceipt(receipt: ParsedReceipt): Promise<unknown> {
    this.counters.receipts++;
    if (receipt.state === null) return SETTLED; // ENROUTE, ACCEPTD, intermediate: no change
    if (!receipt.messageId) {
      this.logger.warn({ carrier: this.name, stat: receipt.stat }, 'SMPP receipt without a message id; ignored');
      return SETTLED;
    }
    const { messageId, state } = receipt;
    const resultInfo = receiptResultInfo(receipt);
    // Known at once (declared forms, or the SMSC's learned): no promise of its own per receipt.
    const now = this.receiptIds.refNow(messageId);
    if (now !== undefined) return this.reportReceipt(messageId, now, state, resultInfo);
    return this.receiptIds.resolve(messageId, { state, resultInfo, at: Date.now() })
      .then((ref) => this.reportReceipt(messageId, ref, state, resultInfo));
  }

  /** `ref`: what ReceiptIds made of the receipt's id `id` (undefined: parked until the SMSC's id form is known). */
  private reportReceipt(id: string, ref: string | null | undefined, state: AttemptState, resultInfo: string): Promise<unknown> {
    if (ref === undefined) return SETTLED;
    if (!ref) {
      this.logger.warn({ carrier: this.name, id }, 'SMPP receipt id cannot be read; ignored');
      return SETTLED;
    }
    return this.sink.report([{ carrier: this.refCarrier, ref, state, resultInfo, at: Date.now() }]);
  }

  private async onMo(pdu: DeliverSm): Promise<void> {
    const info = concatInfo(pdu);
    const base = {
      gateway: 'sms' as const,
      sender: moAddress(pdu.source_addr, pdu.source_addr_ton, this.country),
      recipient: moAddress(pdu.destination_addr, pdu.dest_addr_ton, this.country),
    };
    if (!info || info.total <= 1 || info.seq < 1 || info.seq > info.total) {
      await this.sink.inbound({ ...base, body: decodeUserData(pdu.data_coding, pdu.body), at: Date.now() });
      this.counters.inbound++;
      return;
    }
    // Parts may arrive over different binds (processes): join them in Redis.
    const messageKey = [pdu.source_addr, pdu.destination_addr, info.refBits, info.ref, info.total].join(':');
    const stored = await this.store.addMoPart(messageKey, info.seq, `${pdu.data_coding}:${pdu.body.toString('base64')}`, info.total);
    if (!stored) return; // acknowledged: the part is kept until the others arrive
    const parts: InboundPart[] = [...stored].map(([seq, value]) => {
      const colon = value.indexOf(':');
      return {
        source_addr: pdu.source_addr,
        destination_addr: pdu.destination_addr,
        data_coding: Number(value.slice(0, colon)),
        body: Buffer.from(value.slice(colon + 1), 'base64'),
        udh: { raw: Buffer.alloc(0), elements: [], concat: { ...info, seq } },
      };
    });
    const [message] = reassembleInbound(parts);
    if (!message) return;
    await this.sink.inbound({ ...base, body: message.text, at: Date.now() });
    this.counters.inbound++;
    await this.store.clearMo(messageKey);
  }

  // -------------------------------------------------------------------------------------------
  // Shutdown
  // -------------------------------------------------------------------------------------------

  /**
   * Gives every PDU not yet written back to the engine (their send() rejects and the attempts are
   * handed again later), waits for the answers of those in flight, unbinds and closes. Idempotent.
   */
  close(): Promise<void> {
    if (this.closePromise) return this.closePromise;
    this.closed = true;
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    if (this.stallTimer) clearInterval(this.stallTimer);
    this.wakeTimer = null;
    this.stallTimer = null;
    const error = new SmppCarrierError(`${this.name} is closing`);
    for (const work of [...this.priorityLane.drain(), ...this.normalLane.drain()]) work.finish({ kind: 'give-back', error });
    this.bucket?.close().catch(() => undefined); // unspent leased tokens go back to the other processes
    this.receiptIds.close();
    this.closePromise = this.session.close();
    return this.closePromise;
  }
}
