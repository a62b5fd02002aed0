/**
 * An in-process SMSC for tests, benchmarks and local development (`scripts/smsc.ts` is its CLI).
 * Listens on 127.0.0.1 only. Accepts binds, answers submit_sm with sequential ids and sends
 * delivery receipts whose outcome is chosen by the destination's last two digits:
 *
 *   01 → UNDELIV   02 → submit_sm_resp 0x08 (system error), no receipt   03 → no receipt
 *   04 → DELIVRD after `slowReceiptDelayMs`   05 → REJECTD   anything else → DELIVRD
 *
 * Every part of a multi-part message gets its own id and receipt. It can throttle (ESME_RTHROTTLED
 * 0x58), drop all connections, refuse binds, go silent (answer nothing), delay responses, and send MO messages
 * (long ones as concatenated parts, UCS-2 when needed). Submitted PDUs are recorded (decoded from
 * their raw bytes) for assertions.
 */
import { EventEmitter } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import {
  COMMAND_ID,
  DATA_CODING_GSM7,
  DATA_CODING_UCS2,
  ESM_CLASS_SMSC_RECEIPT,
  ESM_CLASS_UDHI,
  concatUdh,
  decodeUserData,
  parseSmPdu,
  responseCommandId,
  type ConcatInfo,
} from '../shared/carriers/smpp/pdu.js';
import { SMPP_STATUS } from '../shared/carriers/smpp/session.js';
import { DelayLine, SimWire, decodeBindRequest, encodeBare, encodeCStringResponse, encodeDataSm, encodeDeliverSm, type DeliverSmFields, type WirePdu } from './smsc-wire.js';
import { encodeGsm7Unpacked, encodeUcs2, planSms } from '../shared/sms/gsm7.js';

export const SIM_HOST = '127.0.0.1';

/**
 * How ids are written: `hex` upper-case, 8 digits zero-padded (`0000001A`); `hex-lower` lower-case,
 * no padding (`1a`); `decimal` (`26`); `decimal-padded` 10 digits zero-padded (`0000000026`);
 * `string` opaque, UUID-like (`5c1f0e4b-93d2-4a61-8f07-00000000001a`: consecutive ids look
 * unrelated; unique, as the last group is the number).
 */
export type SimIdForm = 'hex' | 'hex-lower' | 'decimal' | 'decimal-padded' | 'string';
export const SIM_ID_FORMS: readonly SimIdForm[] = ['hex', 'hex-lower', 'decimal', 'decimal-padded', 'string'];

/** A 32-bit mix of `n` (murmur3's finaliser), as 8 hex digits. */
function mix32(n: number): string {
  let h = n >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return ((h ^ (h >>> 16)) >>> 0).toString(16).padStart(8, '0');
}

/** The `string` id form of number `n`. */
export function opaqueSimId(n: number): string {
  const a = mix32(n ^ 0x9e3779b9);
  const b = mix32(n + 0x7f4a7c15);
  const last = n.toString(16).padStart(12, '0');
  return `${a}-${b.slice(0, 4)}-4${b.slice(4, 7)}-8${a.slice(1, 4)}-${last}`;
}

export interface SmscSimulatorOptions {
  /** 0 (default) = any free port. */
  port?: number;
  /** When both are set, binds must use exactly this pair (else ESME_RINVSYSID / ESME_RINVPASWD). */
  systemId?: string;
  password?: string;
  /** Form of message_id in submit_sm_resp (see SimIdForm). Default hex. */
  idForm?: SimIdForm;
  /** Form of the id in receipts (text and receipted_message_id); default `same` as idForm. */
  receiptIdForm?: SimIdForm | 'same';
  /** First message id number; default 1. */
  firstId?: number;
  /** Delay before a receipt; default 50 ms. */
  receiptDelayMs?: number;
  /** Delay for destinations ending in 04; default 5000 ms. */
  slowReceiptDelayMs?: number;
  /** Delay before answering each submit_sm; default 0. */
  responseDelayMs?: number;
  /** Include receipted_message_id and message_state TLVs in receipts; default true. */
  receiptTlvs?: boolean;
  /** Send enquire_link to every bound session this often; default 0 (never). */
  enquireLinkIntervalMs?: number;
  /** Keep at most this many submitted records (oldest dropped); default 100 000. */
  maxRecords?: number;
  /**
   * Send a receipt again after this many ms when its deliver_sm_resp was an error or did not come
   * (its session closed, or 10 s passed), as SMSCs do; default 0 (never: counted as not acknowledged).
   */
  redeliverMs?: number;
  /** The PDU receipts and mobile-originated messages arrive in: deliver_sm (default) or data_sm (the text in message_payload). */
  deliverWith?: 'deliver_sm' | 'data_sm';
  /** Send each receipt before the submit_sm_resp it belongs to (the response follows after max(responseDelayMs, 100) ms). */
  receiptFirst?: boolean;
  /** Per-submit receipt delay in ms (tests: hold one part's receipt); null/undefined = the default delays. Not for the CLI. */
  receiptDelayFor?: (record: SubmittedRecord) => number | null | undefined;
}

export interface SubmittedRecord {
  sessionId: number;
  systemId: string;
  sequenceNumber: number;
  /** Id given in submit_sm_resp; null when the submit was refused. */
  messageId: string | null;
  commandStatus: number;
  source_addr: string;
  source_addr_ton: number;
  source_addr_npi: number;
  destination_addr: string;
  dest_addr_ton: number;
  dest_addr_npi: number;
  esm_class: number;
  data_coding: number;
  registered_delivery: number;
  validity_period: string;
  /** UDH including its length octet, or null. */
  udh: Buffer | null;
  concat: ConcatInfo | null;
  /** Decoded text of this part. */
  text: string;
  receivedAt: number;
}

export interface SimulatorCounters {
  binds: number;
  bindsRejected: number;
  unbinds: number;
  submits: number;
  submitsAccepted: number;
  submitsRefused: number;
  receiptsSent: number;
  receiptsAcked: number;
  receiptsNacked: number;
  moPartsSent: number;
  enquireLinksReceived: number;
  enquireLinksSent: number;
  enquireLinkRespsReceived: number;
  /** Most submit_sm received and not yet answered at one time on one session. */
  maxOutstanding: number;
}

export interface SimulatorMode {
  /** Throttle every submit while true. */
  throttle: boolean;
  /** Throttle this many further submits. */
  throttleNext: number;
  /** Answer nothing (binds, submits, enquire_link, unbind). */
  silent: boolean;
  /** Refuse every bind with ESME_RBINDFAIL (an SMSC that is down for maintenance). */
  refuseBinds: boolean;
  /** Answer every submit with this command_status (0x04 ESME_RINVBNDSTS: an SMSC that lost our bind); null: as usual. */
  submitStatus: number | null;
  /** command_status of every enquire_link_resp (non-zero: an SMSC that no longer knows the session). */
  enquireLinkStatus: number;
}

export interface MoRequest {
  from: string;
  to: string;
  text: string;
  /** Use the 16-bit reference IE (0x08) instead of 0x00. */
  udh16?: boolean;
  /** Send the parts in reverse order. */
  reverse?: boolean;
  /** Spread the parts round-robin over every bound receiver/transceiver (as an SMSC may with several binds). */
  spread?: boolean;
  /** Both numbers as national ones (TON 2), written as given (`777000222`), as some SMSCs deliver MO. */
  national?: boolean;
}

export type SimulatorEvents = {
  bind: [info: { sessionId: number; systemId: string; mode: string }];
  submit: [record: SubmittedRecord];
  receipt: [info: { messageId: string; stat: string }];
  unbind: [info: { sessionId: number }];
};

/** A request of ours waiting for the client's response; receipts have no timer of their own (see `expireWaiters`). */
interface Waiter {
  resolve(pdu: WirePdu | null): void;
  timer: NodeJS.Timeout | null;
  /** When a waiter without a timer gives up (epoch ms). */
  expiresAt: number;
}

interface SimSession {
  id: number;
  wire: SimWire;
  systemId: string | null;
  mode: 'transceiver' | 'transmitter' | 'receiver' | null;
  outstanding: number;
  nextSeq: number;
  waiters: Map<number, Waiter>;
  closed: boolean;
  /**
   * Unbind sent or received: the bind is ending and, as at a real SMSC, nothing more is delivered
   * over it; receipts and MO go to another bind, or wait for the next one.
   */
  ending: boolean;
}

interface PendingReceipt {
  systemId: string;
  fields: DeliverSmFields;
  messageId: string;
  stat: string;
}

const BIND_MODES: ReadonlyMap<number, NonNullable<SimSession['mode']>> = new Map([
  [COMMAND_ID.bind_transceiver, 'transceiver'],
  [COMMAND_ID.bind_transmitter, 'transmitter'],
  [COMMAND_ID.bind_receiver, 'receiver'],
]);

/** How long a receipt waits for its deliver_sm_resp before it counts as not acknowledged. */
const RECEIPT_RESPONSE_TIMEOUT_MS = 10_000;

const OUTCOMES: Record<string, { stat: string; state: number; err: string } | 'error' | 'none' | 'slow'> = {
  '01': { stat: 'UNDELIV', state: 5, err: '001' },
  '02': 'error',
  '03': 'none',
  '04': 'slow',
  '05': { stat: 'REJECTD', state: 8, err: '002' },
};
const DELIVERED = { stat: 'DELIVRD', state: 2, err: '000' };

function smppDate(d: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}`;
}

/** smppDate of an epoch-ms time, formatted once per minute. */
let dateCache = { minute: -1, text: '' };
function smppDateOf(ms: number): string {
  const minute = Math.floor(ms / 60_000);
  if (minute !== dateCache.minute) dateCache = { minute, text: smppDate(new Date(ms)) };
  return dateCache.text;
}

export class SmscSimulator extends EventEmitter<SimulatorEvents> {
  readonly options: Required<Omit<SmscSimulatorOptions, 'systemId' | 'password' | 'receiptDelayFor'>> &
    Pick<SmscSimulatorOptions, 'systemId' | 'password' | 'receiptDelayFor'>;
  readonly mode: SimulatorMode = { throttle: false, throttleNext: 0, silent: false, refuseBinds: false, submitStatus: null, enquireLinkStatus: 0 };
  readonly submitted: SubmittedRecord[] = [];
  readonly counters: SimulatorCounters = SmscSimulator.zeroCounters();
  private server: net.Server | null = null;
  private readonly sessions = new Set<SimSession>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Receipts of the fixed delays, one timer per delay (a benchmark sends hundreds of thousands). */
  private readonly delayLines = new Map<number, DelayLine>();
  private waiterSweep: NodeJS.Timeout | null = null;
  private readonly pendingReceipts: PendingReceipt[] = [];
  private sessionSeq = 0;
  private nextId: number;
  private moRef = 0;
  private enquireTimer: NodeJS.Timeout | null = null;
  private _port = 0;

  constructor(options: SmscSimulatorOptions = {}) {
    super();
    this.options = {
      port: options.port ?? 0,
      systemId: options.systemId,
      password: options.password,
      idForm: options.idForm ?? 'hex',
      receiptIdForm: options.receiptIdForm ?? 'same',
      firstId: options.firstId ?? 1,
      receiptDelayMs: options.receiptDelayMs ?? 50,
      slowReceiptDelayMs: options.slowReceiptDelayMs ?? 5_000,
      responseDelayMs: options.responseDelayMs ?? 0,
      receiptTlvs: options.receiptTlvs ?? true,
      enquireLinkIntervalMs: options.enquireLinkIntervalMs ?? 0,
      maxRecords: options.maxRecords ?? 100_000,
      redeliverMs: options.redeliverMs ?? 0,
      receiptFirst: options.receiptFirst ?? false,
      deliverWith: options.deliverWith ?? 'deliver_sm',
      receiptDelayFor: options.receiptDelayFor,
    };
    this.nextId = this.options.firstId;
  }

  private static zeroCounters(): SimulatorCounters {
    return {
      binds: 0,
      bindsRejected: 0,
      unbinds: 0,
      submits: 0,
      submitsAccepted: 0,
      submitsRefused: 0,
      receiptsSent: 0,
      receiptsAcked: 0,
      receiptsNacked: 0,
      moPartsSent: 0,
      enquireLinksReceived: 0,
      enquireLinksSent: 0,
      enquireLinkRespsReceived: 0,
      maxOutstanding: 0,
    };
  }

  get host(): string {
    return SIM_HOST;
  }

  get port(): number {
    return this._port;
  }

  /** Sessions currently bound. */
  get boundSessions(): number {
    let n = 0;
    for (const s of this.sessions) if (s.mode && !s.closed) n++;
    return n;
  }

  /** Open TCP sessions (bound or not). */
  get openSessions(): number {
    return this.sessions.size;
  }

  /** Submits received but not answered yet, over all sessions. */
  get outstanding(): number {
    let n = 0;
    for (const s of this.sessions) n += s.outstanding;
    return n;
  }

  async start(): Promise<{ host: string; port: number }> {
    if (this.server) return { host: SIM_HOST, port: this._port };
    const server = net.createServer((socket) => this.onSession(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port, SIM_HOST, () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', () => {});
    this._port = (server.address() as AddressInfo).port;
    this.waiterSweep = setInterval(() => this.expireWaiters(), 1_000);
    this.waiterSweep.unref();
    if (this.options.enquireLinkIntervalMs > 0) {
      this.enquireTimer = setInterval(() => void this.enquireLinkAll(this.options.enquireLinkIntervalMs), this.options.enquireLinkIntervalMs);
    }
    return { host: SIM_HOST, port: this._port };
  }

  async stop(): Promise<void> {
    if (this.enquireTimer) clearInterval(this.enquireTimer);
    this.enquireTimer = null;
    if (this.waiterSweep) clearInterval(this.waiterSweep);
    this.waiterSweep = null;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const line of this.delayLines.values()) line.clear();
    this.delayLines.clear();
    this.dropConnections();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Changes behaviour: `throttle` true/false (all submits) or a number (the next N). */
  setMode(change: {
    throttle?: boolean | number; silent?: boolean; refuseBinds?: boolean; dropConnections?: boolean; submitStatus?: number | null; enquireLinkStatus?: number;
  }): SimulatorMode {
    if (typeof change.throttle === 'number') {
      this.mode.throttleNext = Math.max(0, Math.floor(change.throttle));
    } else if (typeof change.throttle === 'boolean') {
      this.mode.throttle = change.throttle;
      if (!change.throttle) this.mode.throttleNext = 0;
    }
    if (typeof change.silent === 'boolean') this.mode.silent = change.silent;
    if (typeof change.refuseBinds === 'boolean') this.mode.refuseBinds = change.refuseBinds;
    if (change.submitStatus !== undefined) this.mode.submitStatus = change.submitStatus;
    if (change.enquireLinkStatus !== undefined) this.mode.enquireLinkStatus = change.enquireLinkStatus;
    if (change.dropConnections) this.dropConnections();
    return { ...this.mode };
  }

  /** Answers the next `n` submits with ESME_RTHROTTLED. */
  throttleNext(n: number): void {
    this.mode.throttleNext = n;
  }

  /** Destroys every client connection at once (no unbind). */
  dropConnections(): void {
    for (const s of this.sessions) s.wire.destroy();
  }

  /** Clears records and counters (not the mode or the id sequence). */
  reset(): void {
    this.submitted.length = 0;
    Object.assign(this.counters, SmscSimulator.zeroCounters());
  }

  /** Sends enquire_link to every bound session; resolves with how many answered within `timeoutMs`. */
  async enquireLinkAll(timeoutMs = 2_000): Promise<number> {
    const targets = [...this.sessions].filter((s) => s.mode && !s.closed);
    const results = await Promise.all(
      targets.map((s) => {
        this.counters.enquireLinksSent++;
        return this.request(s, (seq) => encodeBare(COMMAND_ID.enquire_link, seq), timeoutMs);
      }),
    );
    const answered = results.filter((r) => r !== null).length;
    this.counters.enquireLinkRespsReceived += answered;
    return answered;
  }

  /** Sends unbind to every bound session (as an SMSC does before maintenance); resolves with how many answered. */
  async unbindAll(timeoutMs = 2_000): Promise<number> {
    const targets = [...this.sessions].filter((s) => s.mode && !s.closed);
    for (const s of targets) s.ending = true;
    const results = await Promise.all(targets.map((s) => this.request(s, (seq) => encodeBare(COMMAND_ID.unbind, seq), timeoutMs)));
    for (const s of targets) s.wire.end();
    return results.filter((r) => r !== null && r.commandId === COMMAND_ID.unbind_resp).length;
  }

  /**
   * Sends a mobile-originated message to the first bound receiver/transceiver: GSM-7 or UCS-2 as
   * needed, concatenated parts when long. Resolves with the deliver_sm_resp status of each part
   * (null = no answer within 5 s).
   */
  async sendMo(mo: MoRequest): Promise<{ parts: number; statuses: (number | null)[] }> {
    const targets = [...this.sessions].filter(canReceive);
    if (targets.length === 0) throw new Error('no receiver or transceiver is bound');
    const plan = planSms(mo.text, 'utf');
    const dataCoding = plan.encoding === 'gsm7' ? DATA_CODING_GSM7 : DATA_CODING_UCS2;
    const total = plan.parts.length;
    this.moRef = (this.moRef + 1) & 0xffff;
    const pdus = plan.parts.map((part, i) => {
      const body = plan.encoding === 'gsm7' ? encodeGsm7Unpacked(part) : encodeUcs2(part);
      let short = body;
      if (total > 1) {
        const udh = mo.udh16
          ? Buffer.from([0x06, 0x08, 0x04, (this.moRef >> 8) & 0xff, this.moRef & 0xff, total, i + 1])
          : concatUdh(this.moRef & 0xff, total, i + 1);
        short = Buffer.concat([udh, body]);
      }
      const fields: DeliverSmFields = {
        source_addr_ton: mo.national ? 2 : 1,
        source_addr_npi: 1,
        source_addr: mo.from.replace(/^\+/, ''),
        dest_addr_ton: /^\+?\d+$/.test(mo.to) ? (mo.national ? 2 : 1) : 5,
        dest_addr_npi: /^\+?\d+$/.test(mo.to) ? 1 : 0,
        destination_addr: mo.to.replace(/^\+/, ''),
        esm_class: total > 1 ? ESM_CLASS_UDHI : 0,
        data_coding: dataCoding,
        short_message: short,
      };
      return fields;
    });
    if (mo.reverse) pdus.reverse();
    const statuses: (number | null)[] = [];
    for (const [i, pdu] of pdus.entries()) {
      this.counters.moPartsSent++;
      const target = (mo.spread ? targets[i % targets.length] : targets[0]) as SimSession;
      const resp = await this.request(target, (seq) => this.encodeDeliver(pdu, seq), 5_000);
      statuses.push(resp ? resp.commandStatus : null);
    }
    return { parts: total, statuses };
  }

  /** Polls `predicate` every 10 ms until true; rejects after `timeoutMs`. */
  async waitFor(predicate: () => boolean, timeoutMs = 5_000, what = 'condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  // -------------------------------------------------------------------------------------------

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private onSession(socket: net.Socket): void {
    const s: SimSession = {
      id: ++this.sessionSeq,
      wire: null as unknown as SimWire,
      systemId: null,
      mode: null,
      outstanding: 0,
      nextSeq: 1,
      waiters: new Map(),
      closed: false,
      ending: false,
    };
    s.wire = new SimWire(
      socket,
      (pdu) => {
        try {
          this.onPdu(s, pdu);
        } catch {
          s.wire.destroy();
        }
      },
      () => {
        s.closed = true;
        this.sessions.delete(s);
        for (const w of s.waiters.values()) {
          if (w.timer) clearTimeout(w.timer);
          w.resolve(null);
        }
        s.waiters.clear();
      },
    );
    this.sessions.add(s);
  }

  /**
   * Sends a request; resolves with the response, or null on timeout / closed session. `timeoutMs`
   * null: no timer of its own, the once-a-second sweep expires it after RECEIPT_RESPONSE_TIMEOUT_MS.
   */
  private request(s: SimSession, encode: (sequence: number) => Buffer, timeoutMs: number | null): Promise<WirePdu | null> {
    return new Promise((resolve) => {
      const seq = s.nextSeq;
      s.nextSeq = s.nextSeq >= 0x7fffffff ? 1 : s.nextSeq + 1;
      if (s.closed || !s.wire.send(encode(seq))) {
        resolve(null);
        return;
      }
      const waiter: Waiter = { resolve, timer: null, expiresAt: Date.now() + (timeoutMs ?? RECEIPT_RESPONSE_TIMEOUT_MS) };
      if (timeoutMs !== null) {
        waiter.timer = setTimeout(() => {
          s.waiters.delete(seq);
          resolve(null);
        }, timeoutMs);
      }
      s.waiters.set(seq, waiter);
    });
  }

  /** Gives up on timer-less requests past their time (a Map iterates in insertion order: oldest first). */
  private expireWaiters(): void {
    const now = Date.now();
    for (const s of this.sessions) {
      for (const [seq, w] of s.waiters) {
        if (w.timer) continue;
        if (w.expiresAt > now) break;
        s.waiters.delete(seq);
        w.resolve(null);
      }
    }
  }

  private onPdu(s: SimSession, pdu: WirePdu): void {
    if (pdu.commandId >= 0x80000000) {
      const waiter = s.waiters.get(pdu.sequenceNumber);
      if (waiter) {
        s.waiters.delete(pdu.sequenceNumber);
        if (waiter.timer) clearTimeout(waiter.timer);
        waiter.resolve(pdu);
      }
      return;
    }
    if (pdu.commandId === COMMAND_ID.submit_sm) this.counters.submits++;
    if (pdu.commandId === COMMAND_ID.enquire_link) this.counters.enquireLinksReceived++;
    if (this.mode.silent) return;

    const bindMode = BIND_MODES.get(pdu.commandId);
    if (bindMode) {
      this.onBind(s, pdu, bindMode);
      return;
    }
    switch (pdu.commandId) {
      case COMMAND_ID.enquire_link:
        s.wire.send(encodeBare(COMMAND_ID.enquire_link_resp, pdu.sequenceNumber, this.mode.enquireLinkStatus));
        return;
      case COMMAND_ID.unbind:
        this.counters.unbinds++;
        s.ending = true;
        this.emit('unbind', { sessionId: s.id });
        s.wire.send(encodeBare(COMMAND_ID.unbind_resp, pdu.sequenceNumber));
        s.wire.end();
        return;
      case COMMAND_ID.submit_sm:
        this.onSubmit(s, pdu);
        return;
      default:
        s.wire.send(encodeBare(responseCommandId(pdu.commandId), pdu.sequenceNumber, SMPP_STATUS.ESME_RINVCMDID));
    }
  }

  private onBind(s: SimSession, pdu: WirePdu, mode: NonNullable<SimSession['mode']>): void {
    const { systemId, password } = decodeBindRequest(pdu.raw);
    const respId = responseCommandId(pdu.commandId);
    let status: number = SMPP_STATUS.ESME_ROK;
    if (s.mode) status = SMPP_STATUS.ESME_RINVBNDSTS;
    else if (this.mode.refuseBinds) status = SMPP_STATUS.ESME_RBINDFAIL;
    else if (this.options.systemId !== undefined && systemId !== this.options.systemId) status = SMPP_STATUS.ESME_RINVSYSID;
    else if (this.options.password !== undefined && password !== this.options.password) status = SMPP_STATUS.ESME_RINVPASWD;
    if (status !== SMPP_STATUS.ESME_ROK) {
      this.counters.bindsRejected++;
      s.wire.send(encodeBare(respId, pdu.sequenceNumber, status));
      return;
    }
    s.systemId = systemId;
    s.mode = mode;
    this.counters.binds++;
    s.wire.send(encodeCStringResponse(respId, pdu.sequenceNumber, 0, 'SMSCSIM'));
    this.emit('bind', { sessionId: s.id, systemId, mode });
    if (mode !== 'transmitter') this.flushPendingReceipts();
  }

  private formatId(n: number, form: SimIdForm): string {
    switch (form) {
      case 'hex':
        return n.toString(16).toUpperCase().padStart(8, '0');
      case 'hex-lower':
        return n.toString(16);
      case 'decimal-padded':
        return String(n).padStart(10, '0');
      case 'string':
        return opaqueSimId(n);
      default:
        return String(n);
    }
  }

  private onSubmit(s: SimSession, pdu: WirePdu): void {
    if (!s.mode || s.mode === 'receiver') {
      s.wire.send(encodeBare(COMMAND_ID.submit_sm_resp, pdu.sequenceNumber, SMPP_STATUS.ESME_RINVBNDSTS));
      return;
    }
    let view;
    try {
      view = parseSmPdu(pdu.raw);
    } catch {
      this.counters.submitsRefused++;
      s.wire.send(encodeBare(COMMAND_ID.submit_sm_resp, pdu.sequenceNumber, SMPP_STATUS.ESME_RSYSERR));
      return;
    }
    const outcome = OUTCOMES[view.destination_addr.slice(-2)] ?? DELIVERED;
    let status: number = SMPP_STATUS.ESME_ROK;
    if (this.mode.submitStatus !== null) status = this.mode.submitStatus;
    else if (this.mode.throttle) status = SMPP_STATUS.ESME_RTHROTTLED;
    else if (this.mode.throttleNext > 0) {
      this.mode.throttleNext--;
      status = SMPP_STATUS.ESME_RTHROTTLED;
    } else if (outcome === 'error') status = SMPP_STATUS.ESME_RSYSERR;

    let messageId: string | null = null;
    let idNumber = 0;
    if (status === SMPP_STATUS.ESME_ROK) {
      idNumber = this.nextId++;
      messageId = this.formatId(idNumber, this.options.idForm);
    }
    let text: string;
    try {
      text = decodeUserData(view.data_coding, view.body);
    } catch {
      text = view.body.toString('latin1');
    }
    const record: SubmittedRecord = {
      sessionId: s.id,
      systemId: s.systemId ?? '',
      sequenceNumber: view.sequenceNumber,
      messageId,
      commandStatus: status,
      source_addr: view.source_addr,
      source_addr_ton: view.source_addr_ton,
      source_addr_npi: view.source_addr_npi,
      destination_addr: view.destination_addr,
      dest_addr_ton: view.dest_addr_ton,
      dest_addr_npi: view.dest_addr_npi,
      esm_class: view.esm_class,
      data_coding: view.data_coding,
      registered_delivery: view.registered_delivery,
      validity_period: view.validity_period,
      udh: view.udh ? Buffer.from(view.udh.raw) : null,
      concat: view.udh?.concat ?? null,
      text,
      receivedAt: Date.now(),
    };
    this.submitted.push(record);
    if (this.submitted.length > this.options.maxRecords) this.submitted.shift();
    if (status === SMPP_STATUS.ESME_ROK) this.counters.submitsAccepted++;
    else this.counters.submitsRefused++;
    this.emit('submit', record);

    s.outstanding++;
    this.counters.maxOutstanding = Math.max(this.counters.maxOutstanding, s.outstanding);
    const respond = (): void => {
      s.outstanding--;
      if (s.closed || this.mode.silent) return;
      s.wire.send(encodeCStringResponse(COMMAND_ID.submit_sm_resp, pdu.sequenceNumber, status, messageId ?? ''));
      if (!this.options.receiptFirst) scheduleReceipt();
    };
    const scheduleReceipt = (): void => {
      if (status !== SMPP_STATUS.ESME_ROK || messageId === null) return;
      if (outcome === 'none' || outcome === 'error' || (view.registered_delivery & 0x03) === 0) return;
      const final = outcome === 'slow' ? DELIVERED : outcome;
      const custom = this.options.receiptDelayFor?.(record);
      const delay =
        custom !== null && custom !== undefined
          ? custom
          : this.options.receiptFirst
            ? 0
            : outcome === 'slow'
              ? this.options.slowReceiptDelayMs
              : this.options.receiptDelayMs;
      const receiptForm = this.options.receiptIdForm === 'same' ? this.options.idForm : this.options.receiptIdForm;
      const receiptId = this.formatId(idNumber, receiptForm);
      const snippet = text.slice(0, 20).replace(/[^\x20-\x7e]/g, '?');
      const body =
        `id:${receiptId} sub:001 dlvrd:${final.stat === 'DELIVRD' ? '001' : '000'} ` +
        `submit date:${smppDateOf(record.receivedAt)} done date:${smppDateOf(Date.now() + delay)} ` +
        `stat:${final.stat} err:${final.err} text:${snippet}`;
      const fields: DeliverSmFields = {
        source_addr_ton: view.dest_addr_ton,
        source_addr_npi: view.dest_addr_npi,
        source_addr: view.destination_addr,
        dest_addr_ton: view.source_addr_ton,
        dest_addr_npi: view.source_addr_npi,
        destination_addr: view.source_addr,
        esm_class: ESM_CLASS_SMSC_RECEIPT,
        data_coding: DATA_CODING_GSM7,
        short_message: Buffer.from(body, 'latin1'),
      };
      if (this.options.receiptTlvs) {
        fields.receipted_message_id = receiptId;
        fields.message_state = final.state;
      }
      const systemId = s.systemId ?? '';
      const receipt = { systemId, fields, messageId: receiptId, stat: final.stat };
      if (delay <= 0) this.deliverReceipt(receipt, s);
      else if (custom !== null && custom !== undefined) this.later(delay, () => this.deliverReceipt(receipt, s));
      else this.delayLine(delay).add(() => this.deliverReceipt(receipt, s));
    };
    if (this.options.receiptFirst && !this.mode.silent) {
      scheduleReceipt();
      this.later(Math.max(this.options.responseDelayMs, 100), respond);
    } else if (this.options.responseDelayMs > 0) this.later(this.options.responseDelayMs, respond);
    else respond();
  }

  private delayLine(ms: number): DelayLine {
    let line = this.delayLines.get(ms);
    if (!line) {
      line = new DelayLine(ms);
      this.delayLines.set(ms, line);
    }
    return line;
  }

  private receiverFor(systemId: string, preferred?: SimSession): SimSession | undefined {
    if (preferred && canReceive(preferred)) return preferred;
    return [...this.sessions].find((x) => canReceive(x) && x.systemId === systemId);
  }

  private deliverReceipt(receipt: PendingReceipt, preferred?: SimSession): void {
    const target = this.receiverFor(receipt.systemId, preferred);
    if (!target || this.mode.silent) {
      this.pendingReceipts.push(receipt);
      return;
    }
    this.counters.receiptsSent++;
    this.emit('receipt', { messageId: receipt.messageId, stat: receipt.stat });
    void this.request(target, (seq) => this.encodeDeliver(receipt.fields, seq), null).then((resp) => {
      if (resp && resp.commandStatus === 0) {
        this.counters.receiptsAcked++;
        return;
      }
      this.counters.receiptsNacked++;
      if (this.options.redeliverMs > 0 && this.server) this.later(this.options.redeliverMs, () => this.deliverReceipt(receipt));
    });
  }

  /** A receipt or MO in the PDU this SMSC delivers with (`deliverWith`). */
  private encodeDeliver(fields: DeliverSmFields, sequence: number): Buffer {
    return this.options.deliverWith === 'data_sm' ? encodeDataSm(fields, sequence) : encodeDeliverSm(fields, sequence);
  }

  private flushPendingReceipts(): void {
    const pending = this.pendingReceipts.splice(0);
    for (const r of pending) this.deliverReceipt(r);
  }
}

/** Whether deliver_sm (receipts, MO) may be sent over a session: bound to receive, and not ending. */
function canReceive(s: SimSession): boolean {
  return !s.closed && !s.ending && (s.mode === 'transceiver' || s.mode === 'receiver');
}
