/**
 * One SMPP 3.4 ESME connection: bind + automatic rebind with capped, jittered exponential backoff;
 * a submit window (at most `window` unacknowledged submit_sm, FIFO queue behind it) with per-PDU
 * response timeouts; enquire_link both ways with dead-link detection; answers to the SMSC's
 * deliver_sm / enquire_link / unbind; graceful unbind on close.
 *
 * Framing and every PDU sent or read are ours (`pdu.ts`), not the `smpp` library's: its generic
 * decoding and callbacks cost the busiest worker dearly (docs/benchmarks.md), its response-callback map never expires
 * entries, and it decodes short_message to a string, lossily for GSM-7. deliver_sm reaches handlers
 * as `parseSmPdu` reads the raw bytes.
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import type { MessageIdForm } from './pdu.js';
import { smppStatusName } from './status-codes.js';
import {
  COMMAND_ID,
  PduFramer,
  commandName,
  decodeBindResp,
  decodeHeader,
  decodeSubmitSmResp,
  encodeBind,
  encodeDeliverSmResp,
  encodeHeaderPdu,
  encodeSubmitSm,
  isResponse,
  parseSmPdu,
  responseCommandId,
  type BindCommand,
  type DeliverSm,
  type SubmitSmFields,
  type SubmitSmTlvs,
} from './pdu.js';
import { isValidCountry } from '../../phone/normalize.js';

// ---------------------------------------------------------------------------------------------
// Errors and status codes
// ---------------------------------------------------------------------------------------------

export const SMPP_STATUS = {
  ESME_ROK: 0x00,
  ESME_RINVCMDID: 0x03,
  ESME_RINVBNDSTS: 0x04,
  ESME_RSYSERR: 0x08,
  ESME_RBINDFAIL: 0x0d,
  ESME_RINVPASWD: 0x0e,
  ESME_RINVSYSID: 0x0f,
  ESME_RMSGQFUL: 0x14,
  ESME_RTHROTTLED: 0x58,
  ESME_RX_T_APPN: 0x64,
  ESME_RX_P_APPN: 0x65,
} as const;

export class SmppError extends Error {
  override name = 'SmppError';
}

export type SmppTimeoutPhase = 'queue' | 'response' | 'bind' | 'enquire_link' | 'unbind' | 'connect';

/** A request got no response in time (`sent: true`: the SMSC may have acted on it). */
export class SmppTimeoutError extends SmppError {
  override name = 'SmppTimeoutError';
  readonly sent: boolean;
  readonly phase: SmppTimeoutPhase;
  constructor(message: string, details: { sent: boolean; phase: SmppTimeoutPhase }) {
    super(message);
    this.sent = details.sent;
    this.phase = details.phase;
  }
}

/** The connection went away or the session is closed (`sent: true`: the outcome is unknown). */
export class SmppConnectionError extends SmppError {
  override name = 'SmppConnectionError';
  readonly sent: boolean;
  constructor(message: string, details: { sent: boolean }) {
    super(message);
    this.sent = details.sent;
  }
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

export type BindMode = 'transceiver' | 'transmitter' | 'receiver';

/** The minimal logger shape used (pino's Logger fits). */
export interface SmppLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface ReconnectOptions {
  /** First delay after a drop; default 1000 ms. */
  initialDelayMs?: number;
  /** Cap; default 60 000 ms. */
  maxDelayMs?: number;
  /** Growth per consecutive failure; default 2. */
  factor?: number;
  /** ± fraction of random spread; default 0.2. */
  jitter?: number;
  /** A bind that lasted this long resets the backoff; default 10 000 ms. */
  stableAfterMs?: number;
}

export interface SmppSessionOptions {
  host: string;
  port: number;
  tls?: boolean;
  systemId: string;
  password: string;
  systemType?: string;
  bindMode?: BindMode;
  /** interface_version in the bind; default 0x34. */
  interfaceVersion?: number;
  addrTon?: number;
  addrNpi?: number;
  addressRange?: string;
  /** Max unacknowledged submit_sm; default 10. */
  window?: number;
  /** Max submit_sm per second (evenly spaced); null/0 = unlimited. */
  tps?: number | null;
  /** Per-PDU response timeout; default 10 000 ms. */
  responseTimeoutMs?: number;
  /**
   * Keep the link when a submit_sm gets no response in time (default false: the link is dropped
   * and bound again, so that what was in flight is sent again over a fresh bind, not over a link
   * that may be dead or may answer it late; Kannel's default `wait-ack-expire` does the same).
   */
  keepLinkOnSubmitTimeout?: boolean;
  /** How long a submit may wait for a window slot / a bound link; default 60 000 ms, 0 = forever. */
  queueTimeoutMs?: number;
  /** enquire_link period; default 30 000 ms; 0 disables. */
  enquireLinkIntervalMs?: number;
  /** enquire_link_resp deadline; default responseTimeoutMs. */
  enquireLinkTimeoutMs?: number;
  connectTimeoutMs?: number;
  bindTimeoutMs?: number;
  /** Wait for unbind_resp (and for in-flight submits before unbinding) on close; default 5000 ms. */
  unbindTimeoutMs?: number;
  reconnect?: ReconnectOptions | false;
  logger?: SmppLogger;
  /** Carried for the connector (id canonicalisation); the session itself does not use them. */
  submitIdForm?: MessageIdForm;
  receiptIdForm?: MessageIdForm;
}

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

export type SmppState = 'idle' | 'connecting' | 'binding' | 'bound' | 'unbinding' | 'reconnecting' | 'closed';

export interface SubmitResult {
  /** submit_sm_resp command_status: 0 = accepted; non-zero (e.g. 0x58 throttled) is not an exception. */
  commandStatus: number;
  /** message_id from the response, when the SMSC sent one. */
  messageId?: string;
  sequenceNumber: number;
}

export interface SubmitOptions {
  /** Overrides responseTimeoutMs for this PDU. */
  timeoutMs?: number;
  /** Optional parameters to append to the submit_sm. */
  tlvs?: SubmitSmTlvs;
}

export type DeliverHandler = (pdu: DeliverSm) => Promise<unknown>;

export type SmppSessionEvents = {
  state: [state: SmppState];
  bound: [info: { systemId: string; mode: BindMode }];
  disconnected: [info: { reason: string; wasBound: boolean; willReconnect: boolean; reconnectInMs: number | null }];
  bindFailed: [info: { commandStatus: number }];
};

export interface SmppSessionStats {
  state: SmppState;
  inFlight: number;
  queued: number;
  maxInFlight: number;
  submitsSent: number;
  submitResponses: number;
  submitTimeouts: number;
  enquireLinksSent: number;
  enquireLinkResponses: number;
  enquireLinksAnswered: number;
  deliversReceived: number;
  binds: number;
  disconnects: number;
}

// ---------------------------------------------------------------------------------------------
// Raw PDU capture (for the SMSC simulator, which still frames with the `smpp` library)
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------------------------

/**
 * A generic_nack answers a request with a failure; one with status 0 (seen from broken SMSCs)
 * would read as success, so it is reported as ESME_RSYSERR.
 */
function nackAsFailure(raw: Buffer): Buffer {
  if (raw.readUInt32BE(8) !== 0) return raw;
  const copy = Buffer.from(raw);
  copy.writeUInt32BE(SMPP_STATUS.ESME_RSYSERR, 8);
  return copy;
}

interface Waiter {
  /** The command id of the response this request expects (generic_nack is always accepted too). */
  expects: number;
  /** With the whole response PDU. */
  resolve(raw: Buffer): void;
  reject(err: Error): void;
  /**
   * A submit_sm's waiter: its queued submit, settled by `submitAnswered` / `submitFailed` instead
   * of `resolve` / `reject` (no promise per submit between the session and its queue item).
   */
  submit: QueuedSubmit | null;
  /**
   * When the response is due (Date.now() ms). No timer of its own: the connection's one expiry
   * timer (`armExpiry`) is armed for the earliest deadline of its waiters.
   */
  deadline: number;
  /** For the timeout's error: what was sent, the timeout it had, and the phase. */
  command: string;
  timeoutMs: number;
  phase: SmppTimeoutPhase;
}

interface Connection {
  id: number;
  socket: net.Socket;
  framer: PduFramer;
  /** sequence_number of the last request sent. */
  sequence: number;
  waiters: Map<number, Waiter>;
  boundAt: number | null;
  closed: boolean;
  closeReason: string | null;
  timers: Set<NodeJS.Timeout>;
  /** The one timer that fails waiters past their deadline, armed for `expiryAt` (Infinity: none). */
  expiryTimer: NodeJS.Timeout | null;
  expiryAt: number;
  /** `expireWaiters` bound to this connection (one closure per connection, not per request). */
  expire: () => void;
  enquireTimer: NodeJS.Timeout | null;
  enquirePending: boolean;
  /**
   * Why the link is being given up once the submits it has in flight are answered (or time out):
   * nothing more is written to it meanwhile. Null: in use.
   */
  drainReason: string | null;
  closedPromise: Promise<void>;
  /** The socket is corked until the end of this tick (see `send`). */
  corked: boolean;
}

interface QueuedSubmit {
  fields: SubmitSmFields;
  options: SubmitOptions;
  resolve(result: SubmitResult): void;
  reject(err: Error): void;
  queueTimer: NodeJS.Timeout | null;
}

const BIND_COMMAND: Readonly<Record<BindMode, BindCommand>> = {
  transceiver: 'bind_transceiver',
  transmitter: 'bind_transmitter',
  receiver: 'bind_receiver',
};

function hex(status: number): string {
  return `0x${status.toString(16).padStart(8, '0')}`;
}

export class SmppSession extends EventEmitter<SmppSessionEvents> {
  /** Kept private: it holds the password. */
  private readonly options: Readonly<SmppSessionOptions>;
  private readonly bindMode: BindMode;
  private readonly window: number;
  private readonly responseTimeoutMs: number;
  private readonly queueTimeoutMs: number;
  private readonly enquireLinkIntervalMs: number;
  private readonly enquireLinkTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly bindTimeoutMs: number;
  private readonly unbindTimeoutMs: number;
  private readonly reconnect: Required<ReconnectOptions> | null;
  private readonly minSpacingMs: number;

  private _state: SmppState = 'idle';
  private _lastError: string | null = null;
  private conn: Connection | null = null;
  private connSeq = 0;
  private failures = 0;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private pumpTimer: NodeJS.Timeout | null = null;
  private nextSendAt = 0;
  private closing = false;
  private closePromise: Promise<void> | null = null;
  private readonly queue: QueuedSubmit[] = [];
  private inFlight = 0;
  private deliverHandler: DeliverHandler | null = null;
  private boundWaiters = new Set<{ resolve(): void; reject(err: Error): void }>();
  private idleWaiters: (() => void)[] = [];
  private counters = {
    maxInFlight: 0,
    submitsSent: 0,
    submitResponses: 0,
    submitTimeouts: 0,
    enquireLinksSent: 0,
    enquireLinkResponses: 0,
    enquireLinksAnswered: 0,
    deliversReceived: 0,
    binds: 0,
    disconnects: 0,
  };

  constructor(options: SmppSessionOptions) {
    super();
    this.options = { ...options };
    this.bindMode = options.bindMode ?? 'transceiver';
    this.window = options.window ?? 10;
    if (!Number.isInteger(this.window) || this.window < 1) throw new RangeError(`window must be an integer >= 1, got ${this.window}`);
    this.responseTimeoutMs = options.responseTimeoutMs ?? 10_000;
    this.queueTimeoutMs = options.queueTimeoutMs ?? 60_000;
    this.enquireLinkIntervalMs = options.enquireLinkIntervalMs ?? 30_000;
    this.enquireLinkTimeoutMs = options.enquireLinkTimeoutMs ?? this.responseTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.bindTimeoutMs = options.bindTimeoutMs ?? this.responseTimeoutMs;
    this.unbindTimeoutMs = options.unbindTimeoutMs ?? 5_000;
    this.reconnect =
      options.reconnect === false
        ? null
        : {
            initialDelayMs: options.reconnect?.initialDelayMs ?? 1_000,
            maxDelayMs: options.reconnect?.maxDelayMs ?? 60_000,
            factor: options.reconnect?.factor ?? 2,
            jitter: options.reconnect?.jitter ?? 0.2,
            stableAfterMs: options.reconnect?.stableAfterMs ?? 10_000,
          };
    this.minSpacingMs = options.tps && options.tps > 0 ? 1000 / options.tps : 0;
  }

  get state(): SmppState {
    return this._state;
  }

  /** Why the link was last lost or refused (`bind rejected: ESME_RINVPASWD`, `connect ECONNREFUSED …`), or null. */
  get lastError(): string | null {
    return this._lastError;
  }

  get stats(): SmppSessionStats {
    return { state: this._state, inFlight: this.inFlight, queued: this.queue.length, ...this.counters };
  }

  /** Starts connecting (idempotent). Binding and rebinding then happen in the background. */
  start(): this {
    if (this._state === 'idle') this.connect();
    return this;
  }

  /** Resolves when bound (now or later); rejects on timeout or when the session closes. */
  waitUntilBound(timeoutMs = this.connectTimeoutMs + this.bindTimeoutMs): Promise<void> {
    if (this._state === 'bound') return Promise.resolve();
    if (this._state === 'closed' || this.closing) return Promise.reject(new SmppConnectionError('session is closed', { sent: false }));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.boundWaiters.delete(waiter);
        reject(new SmppTimeoutError(`not bound within ${timeoutMs} ms`, { sent: false, phase: 'bind' }));
      }, timeoutMs);
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.boundWaiters.add(waiter);
    });
  }

  /** Registers the deliver_sm handler (receipts and MO). Returns a function that removes it. */
  onDeliver(handler: DeliverHandler): () => void {
    this.deliverHandler = handler;
    return () => {
      if (this.deliverHandler === handler) this.deliverHandler = null;
    };
  }

  /**
   * Queues one submit_sm. Resolves with the submit_sm_resp status (non-zero statuses included);
   * rejects with SmppTimeoutError (no window slot in time: `sent` false; no response: `sent`
   * true) or SmppConnectionError (closed, or the link dropped while waiting for the response).
   * Submits that were not yet written stay queued across a rebind.
   */
  submit(fields: SubmitSmFields, options: SubmitOptions = {}): Promise<SubmitResult> {
    return new Promise<SubmitResult>((resolve, reject) => {
      if (this.closing || this._state === 'closed') {
        reject(new SmppConnectionError('session is closed', { sent: false }));
        return;
      }
      if (this.bindMode === 'receiver') {
        reject(new SmppError('a receiver bind cannot submit'));
        return;
      }
      const item: QueuedSubmit = { fields, options, resolve, reject, queueTimer: null };
      this.queue.push(item);
      this.pump();
      // Written at once (the window had room: the usual case, as the carrier keeps within the
      // window), it needs no queue timer. Still queued, it is the queue's last item (pump takes
      // from the head).
      if (this.queueTimeoutMs > 0 && this.queue.length > 0) {
        item.queueTimer = setTimeout(() => {
          const index = this.queue.indexOf(item);
          if (index < 0) return;
          this.queue.splice(index, 1);
          reject(
            new SmppTimeoutError(`submit waited ${this.queueTimeoutMs} ms without a window slot on a bound link`, {
              sent: false,
              phase: 'queue',
            }),
          );
        }, this.queueTimeoutMs);
      }
    });
  }

  /**
   * Stops rebinding, fails queued submits (`sent` false), waits for in-flight submits and then for
   * unbind_resp (each up to unbindTimeoutMs), and closes the socket. Idempotent.
   */
  close(): Promise<void> {
    if (this.closePromise) return this.closePromise;
    this.closing = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.pumpTimer) clearTimeout(this.pumpTimer);
    this.reconnectTimer = null;
    this.pumpTimer = null;
    for (const item of this.queue.splice(0)) {
      if (item.queueTimer) clearTimeout(item.queueTimer);
      item.reject(new SmppConnectionError('session closed before the submit was sent', { sent: false }));
    }
    for (const w of this.boundWaiters) w.reject(new SmppConnectionError('session closed', { sent: false }));
    this.boundWaiters.clear();
    this.closePromise = this.shutdown();
    return this.closePromise;
  }

  // -------------------------------------------------------------------------------------------
  // Connection lifecycle
  // -------------------------------------------------------------------------------------------

  private setState(state: SmppState): void {
    if (this._state === state) return;
    this._state = state;
    this.emit('state', state);
  }

  private connect(): void {
    this.reconnectTimer = null;
    if (this.closing) return;
    this.setState('connecting');
    const { host, port } = this.options;
    const socket = this.options.tls ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }) : net.connect({ host, port });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    let markClosed: () => void = () => {};
    const conn: Connection = {
      id: ++this.connSeq,
      socket,
      framer: new PduFramer(),
      sequence: 0,
      waiters: new Map(),
      boundAt: null,
      closed: false,
      closeReason: null,
      timers: new Set(),
      expiryTimer: null,
      expiryAt: Infinity,
      expire: () => this.expireWaiters(conn),
      enquireTimer: null,
      enquirePending: false,
      drainReason: null,
      corked: false,
      closedPromise: new Promise<void>((resolve) => (markClosed = resolve)),
    };
    this.conn = conn;
    socket.on('error', (err: Error) => {
      conn.closeReason ??= err.message;
      socket.destroy();
    });
    socket.on('close', () => {
      this.onClose(conn);
      markClosed();
    });
    socket.on('data', (chunk: Buffer) => this.onData(conn, chunk));
    const connectTimer = this.timer(conn, this.connectTimeoutMs, () => this.destroyConn(conn, `connect timeout after ${this.connectTimeoutMs} ms`));
    socket.once(this.options.tls ? 'secureConnect' : 'connect', () => {
      clearTimeout(connectTimer);
      conn.timers.delete(connectTimer);
      this.bind(conn);
    });
  }

  private timer(conn: Connection, ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      conn.timers.delete(t);
      fn();
    }, ms);
    conn.timers.add(t);
    return t;
  }

  private bind(conn: Connection): void {
    if (conn.closed) return;
    this.setState('binding');
    const o = this.options;
    const command = BIND_COMMAND[this.bindMode];
    const fields = {
      system_id: o.systemId,
      password: o.password,
      system_type: o.systemType ?? '',
      interface_version: o.interfaceVersion ?? 0x34,
      addr_ton: o.addrTon ?? 0,
      addr_npi: o.addrNpi ?? 0,
      address_range: o.addressRange ?? '',
    };
    this.request(conn, command, (sequence) => encodeBind(command, fields, sequence), this.bindTimeoutMs, 'bind').then(
      (raw) => {
        if (conn.closed) return;
        const resp = decodeBindResp(raw);
        if (resp.commandStatus !== 0) {
          this.options.logger?.warn({ host: o.host, systemId: o.systemId, commandStatus: hex(resp.commandStatus) }, 'SMPP bind rejected');
          this.emit('bindFailed', { commandStatus: resp.commandStatus });
          this.destroyConn(conn, `bind rejected: ${smppStatusName(resp.commandStatus)}`);
          return;
        }
        conn.boundAt = Date.now();
        this.counters.binds++;
        this.setState('bound');
        this.startEnquireLink(conn);
        const systemId = resp.systemId ?? '';
        this.options.logger?.info({ host: o.host, port: o.port, systemId: o.systemId, smsc: systemId, mode: this.bindMode }, 'SMPP bound');
        this.emit('bound', { systemId, mode: this.bindMode });
        for (const w of this.boundWaiters) w.resolve();
        this.boundWaiters.clear();
        this.pump();
      },
      (err: Error) => this.destroyConn(conn, `bind failed: ${err.message}`),
    );
  }

  private startEnquireLink(conn: Connection): void {
    if (this.enquireLinkIntervalMs <= 0) return;
    conn.enquireTimer = setInterval(() => {
      if (conn.closed || conn.enquirePending || this._state !== 'bound') return;
      conn.enquirePending = true;
      this.counters.enquireLinksSent++;
      const encode = (sequence: number): Buffer => encodeHeaderPdu(COMMAND_ID.enquire_link, sequence);
      this.request(conn, 'enquire_link', encode, this.enquireLinkTimeoutMs, 'enquire_link').then(
        (raw) => {
          conn.enquirePending = false;
          this.counters.enquireLinkResponses++;
          // ESME_RINVBNDSTS: the SMSC no longer knows this session. (Another error, such as a
          // generic_nack ESME_RINVCMDID from an SMSC without enquire_link, still shows the link alive.)
          const status = decodeHeader(raw).commandStatus;
          if (status === SMPP_STATUS.ESME_RINVBNDSTS) this.destroyConn(conn, `enquire_link answered ${smppStatusName(status)}`);
        },
        (err: Error) => {
          conn.enquirePending = false;
          if (err instanceof SmppTimeoutError) this.destroyConn(conn, `no enquire_link_resp within ${this.enquireLinkTimeoutMs} ms`);
        },
      );
    }, this.enquireLinkIntervalMs);
  }

  private destroyConn(conn: Connection, reason: string): void {
    if (conn.closed) return;
    conn.closeReason ??= reason;
    conn.socket.destroy();
  }

  private onClose(conn: Connection): void {
    if (conn.closed) return;
    conn.closed = true;
    for (const t of conn.timers) clearTimeout(t);
    conn.timers.clear();
    if (conn.expiryTimer) clearTimeout(conn.expiryTimer);
    conn.expiryTimer = null;
    if (conn.enquireTimer) clearInterval(conn.enquireTimer);
    const reason = conn.closeReason ?? 'connection closed by peer';
    if (!this.closing) this._lastError = reason;
    for (const w of conn.waiters.values()) this.fail(conn, w, new SmppConnectionError(`connection lost (${reason})`, { sent: true }));
    conn.waiters.clear();
    if (this.conn === conn) this.conn = null;
    this.counters.disconnects++;
    const wasBound = conn.boundAt !== null;
    const stable = wasBound && this.reconnect !== null && Date.now() - (conn.boundAt ?? 0) >= this.reconnect.stableAfterMs;
    this.failures = stable ? 1 : this.failures + 1;
    const willReconnect = !this.closing && this.reconnect !== null;
    const delay = willReconnect ? this.backoffDelay() : null;
    this.options.logger?.[this.closing ? 'debug' : 'warn'](
      { host: this.options.host, port: this.options.port, reason, wasBound, reconnectInMs: delay },
      'SMPP connection closed',
    );
    if (delay === null) {
      this.setState('closed');
      if (!this.closing) {
        for (const w of this.boundWaiters) w.reject(new SmppConnectionError(`connection lost (${reason})`, { sent: false }));
        this.boundWaiters.clear();
        this.closing = true;
        for (const item of this.queue.splice(0)) {
          if (item.queueTimer) clearTimeout(item.queueTimer);
          item.reject(new SmppConnectionError(`connection lost (${reason}) and reconnect is disabled`, { sent: false }));
        }
      }
    } else {
      this.setState('reconnecting');
      this.reconnectTimer = setTimeout(() => this.connect(), delay);
    }
    this.emit('disconnected', { reason, wasBound, willReconnect, reconnectInMs: delay });
  }

  /** Capped exponential backoff with ± jitter, from the number of consecutive failures (≥ 1). */
  private backoffDelay(): number {
    const r = this.reconnect;
    if (!r) return 0;
    const base = Math.min(r.maxDelayMs, r.initialDelayMs * r.factor ** Math.max(0, this.failures - 1));
    const spread = 1 + r.jitter * (Math.random() * 2 - 1);
    return Math.max(0, Math.round(Math.min(r.maxDelayMs, base * spread)));
  }

  private async shutdown(): Promise<void> {
    const conn = this.conn;
    if (!conn) {
      this.setState('closed');
      return;
    }
    if (this._state === 'bound') {
      await this.waitForIdle(this.unbindTimeoutMs);
      if (!conn.closed) {
        this.setState('unbinding');
        try {
          const encode = (sequence: number): Buffer => encodeHeaderPdu(COMMAND_ID.unbind, sequence);
          await this.request(conn, 'unbind', encode, this.unbindTimeoutMs, 'unbind');
        } catch {
          // no unbind_resp: close anyway
        }
        conn.closeReason ??= 'closed (unbound)';
        if (!conn.closed) {
          conn.socket.end();
          const grace = setTimeout(() => conn.socket.destroy(), 1_000);
          await conn.closedPromise;
          clearTimeout(grace);
        }
      }
    } else {
      this.destroyConn(conn, 'closed');
      await conn.closedPromise;
    }
    this.setState('closed');
  }

  private waitForIdle(timeoutMs: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.idleWaiters.push(done);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Requests and responses
  // -------------------------------------------------------------------------------------------

  /**
   * Writes a PDU. The socket stays corked until the end of the tick, so the PDUs of one window
   * fill (and the responses to one read's receipts) leave in one write system call instead of one
   * each.
   */
  private send(conn: Connection, pdu: Buffer): void {
    if (!conn.socket.writable) return;
    if (!conn.corked) {
      conn.corked = true;
      conn.socket.cork();
      process.nextTick(() => {
        conn.corked = false;
        conn.socket.uncork();
      });
    }
    conn.socket.write(pdu);
  }

  /**
   * Sends a request PDU, encoded with the next sequence number, and resolves with its response
   * (any status, generic_nack included); rejects on timeout / loss.
   */
  private request<A = undefined>(
    conn: Connection,
    command: string,
    encode: (sequence: number, arg: A) => Buffer,
    timeoutMs: number,
    phase: SmppTimeoutPhase,
    arg?: A,
  ): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (conn.closed || !conn.socket.writable) {
        reject(new SmppConnectionError(`cannot send ${command}: socket is not writable`, { sent: false }));
        return;
      }
      const seq = nextSequence(conn);
      const pdu = encode(seq, arg as A);
      this.send(conn, pdu);
      // The waiter holds the promise's own resolve and reject, and its deadline: per request the
      // executor is the only closure made, and no timer (see armExpiry).
      this.addWaiter(conn, seq, { expects: responseCommandId(decodeHeader(pdu).commandId), resolve, reject, submit: null, deadline: Date.now() + timeoutMs, command, timeoutMs, phase });
    });
  }

  private addWaiter(conn: Connection, seq: number, waiter: Waiter): void {
    conn.waiters.set(seq, waiter);
    if (waiter.deadline < conn.expiryAt) this.armExpiry(conn, waiter.deadline);
  }

  /** A waiter's request failed (timeout, link lost). A submit's failure is handled after the current turn's code, as a rejection would be. */
  private fail(conn: Connection, waiter: Waiter, err: Error): void {
    const item = waiter.submit;
    if (item) queueMicrotask(() => this.submitFailed(conn, item, err));
    else waiter.reject(err);
  }

  /**
   * Arms the connection's expiry timer for `at`, the earliest deadline of its waiters. A response
   * does not disarm it: when it fires, it fails the waiters past their deadline and arms itself for
   * the earliest one left, so under steady traffic it fires about once per response timeout and
   * looks at at most a window of waiters, instead of a timer made and cleared per request.
   */
  private armExpiry(conn: Connection, at: number): void {
    if (conn.expiryTimer) clearTimeout(conn.expiryTimer);
    conn.expiryAt = at;
    conn.expiryTimer = setTimeout(conn.expire, Math.max(0, at - Date.now()));
  }

  /** Fails every waiter of `conn` whose response is overdue; arms the timer for the next deadline. */
  private expireWaiters(conn: Connection): void {
    conn.expiryTimer = null;
    conn.expiryAt = Infinity;
    if (conn.closed) return;
    const now = Date.now();
    let next = Infinity;
    let submitTimedOut: Waiter | null = null;
    for (const [seq, waiter] of conn.waiters) {
      if (waiter.deadline <= now) {
        conn.waiters.delete(seq);
        if (waiter.submit) submitTimedOut = waiter;
        this.fail(conn, waiter, new SmppTimeoutError(`no ${waiter.command}_resp within ${waiter.timeoutMs} ms`, { sent: true, phase: waiter.phase }));
      } else if (waiter.deadline < next) {
        next = waiter.deadline;
      }
    }
    if (submitTimedOut && !this.options.keepLinkOnSubmitTimeout) {
      // The rest of the window fails as unanswered with the link (sent once more after the rebind).
      this.destroyConn(conn, `no submit_sm_resp within ${submitTimedOut.timeoutMs} ms`);
      return;
    }
    if (next !== Infinity) this.armExpiry(conn, next);
  }

  /**
   * Hands queued submits to the bound connection while the window has room. Only to a socket still
   * writable: a socket destroyed by a reset stays `this.conn`, bound, until its 'close' event
   * (emitted on a later tick), and a submit written to it fails at once and is queued again;
   * pumped again from that failure's promise, it would fail again, and so on in promise callbacks
   * that never let the 'close' event (or a timer) run: the process would spin forever. The 'close'
   * event ends the connection and the rebind pumps the queue.
   */
  private pump(): void {
    if (this.pumpTimer) return;
    while (this._state === 'bound' && this.conn?.socket.writable && this.conn.drainReason === null && !this.closing && this.inFlight < this.window && this.queue.length > 0) {
      if (this.minSpacingMs > 0) {
        const now = Date.now();
        if (now < this.nextSendAt) {
          this.pumpTimer = setTimeout(() => {
            this.pumpTimer = null;
            this.pump();
          }, Math.ceil(this.nextSendAt - now));
          return;
        }
        this.nextSendAt = Math.max(now, this.nextSendAt) + this.minSpacingMs;
      }
      const item = this.queue.shift() as QueuedSubmit;
      if (item.queueTimer) clearTimeout(item.queueTimer);
      item.queueTimer = null;
      this.dispatch(this.conn, item);
    }
    // A socket that can no longer be written yet is not destroyed (ended, not yet closed) is
    // destroyed here, so its 'close' event, and the rebind, always follow; a destroyed one (a
    // reset) closes on its own, with its own reason.
    const conn = this.conn;
    if (conn && !conn.socket.writable && !conn.socket.destroyed && this.queue.length > 0 && !this.closing) this.destroyConn(conn, 'socket not writable');
  }

  /**
   * Writes a queued submit and waits for its response in the connection's waiters, settled by
   * `submitAnswered` or `submitFailed`: no promise, closure or timer per submit (docs/architecture.md,
   * "Hot loops").
   */
  private dispatch(conn: Connection, item: QueuedSubmit): void {
    this.inFlight++;
    this.counters.maxInFlight = Math.max(this.counters.maxInFlight, this.inFlight);
    this.counters.submitsSent++;
    if (conn.closed || !conn.socket.writable) {
      const err = new SmppConnectionError('cannot send submit_sm: socket is not writable', { sent: false });
      queueMicrotask(() => this.submitFailed(conn, item, err));
      return;
    }
    const seq = nextSequence(conn);
    let pdu: Buffer;
    try {
      pdu = encodeQueuedSubmit(seq, item);
    } catch (err) {
      // Fields the encoder refuses (a TLV out of range): this submit fails alone, after this turn.
      queueMicrotask(() => this.submitFailed(conn, item, err instanceof Error ? err : new Error(String(err))));
      return;
    }
    this.send(conn, pdu);
    const timeoutMs = item.options.timeoutMs ?? this.responseTimeoutMs;
    this.addWaiter(conn, seq, {
      expects: COMMAND_ID.submit_sm_resp, resolve: unused, reject: unused, submit: item,
      deadline: Date.now() + timeoutMs, command: 'submit_sm', timeoutMs, phase: 'response',
    });
  }

  /** The submit_sm_resp (or generic_nack) of a written submit. */
  private submitAnswered(conn: Connection, item: QueuedSubmit, raw: Buffer): void {
    this.counters.submitResponses++;
    const resp = decodeSubmitSmResp(raw);
    const result: SubmitResult = { commandStatus: resp.commandStatus, sequenceNumber: resp.sequenceNumber };
    if (resp.messageId) result.messageId = resp.messageId;
    item.resolve(result);
    if (resp.commandStatus === SMPP_STATUS.ESME_RINVBNDSTS) {
      // The SMSC holds no bind of ours on this link: bind again (the carrier sends the part again),
      // once the rest of the window is answered (most likely the same way), so that none of it
      // counts as unanswered and uses up its one resend.
      conn.drainReason ??= 'submit_sm answered ESME_RINVBNDSTS';
    }
    if (conn.drainReason !== null && !hasSubmitWaiters(conn)) this.destroyConn(conn, conn.drainReason);
    this.submitDone();
  }

  /** A submit that got no response: never written (queued again), or written and lost or timed out. */
  private submitFailed(conn: Connection, item: QueuedSubmit, err: Error): void {
    if (err instanceof SmppConnectionError && !err.sent && !this.closing) {
      // Never written: keep its place at the head of the queue for the next bind.
      this.counters.submitsSent--;
      this.queue.unshift(item);
      this.destroyConn(conn, 'socket not writable');
    } else {
      if (err instanceof SmppTimeoutError) this.counters.submitTimeouts++;
      item.reject(err);
    }
    this.submitDone();
  }

  private submitDone(): void {
    this.inFlight--;
    if (this.inFlight === 0) for (const done of this.idleWaiters.splice(0)) done();
    this.pump();
  }

  /**
   * Handles the PDUs a chunk completes, in order. A command_length out of range or a failure to
   * handle a PDU drops the connection: what follows on the stream can no longer be trusted.
   */
  private onData(conn: Connection, chunk: Buffer): void {
    conn.framer.push(chunk);
    for (;;) {
      let raw: Buffer | null;
      try {
        raw = conn.framer.next();
      } catch (err) {
        this.options.logger?.warn({ err }, 'SMPP protocol error');
        this.destroyConn(conn, `protocol error: ${err instanceof Error ? err.message : String(err)}`);
        return;
      }
      if (raw === null) return;
      try {
        this.onPdu(conn, raw);
      } catch (err) {
        this.options.logger?.warn({ err, command: commandName(raw.readUInt32BE(4)) }, 'SMPP PDU handling failed');
        this.destroyConn(conn, `PDU handling failed: ${err instanceof Error ? err.message : String(err)}`);
        return;
      }
    }
  }

  private onPdu(conn: Connection, raw: Buffer): void {
    if (conn.closed) return;
    const { commandId, sequenceNumber } = decodeHeader(raw);
    if (isResponse(commandId)) {
      const waiter = conn.waiters.get(sequenceNumber);
      if (!waiter) return;
      if (commandId !== waiter.expects && commandId !== COMMAND_ID.generic_nack) {
        // Another command's response with this number (e.g. a nack of one of our own responses,
        // which carries the SMSC's sequence): not the answer; the real one or the timeout follows.
        this.options.logger?.warn({ command: commandName(commandId), sequenceNumber }, 'SMPP response of an unexpected command ignored');
        return;
      }
      conn.waiters.delete(sequenceNumber);
      const response = commandId === COMMAND_ID.generic_nack ? nackAsFailure(raw) : raw;
      if (waiter.submit) this.submitAnswered(conn, waiter.submit, response);
      else waiter.resolve(response);
      return;
    }
    switch (commandId) {
      case COMMAND_ID.enquire_link:
        this.counters.enquireLinksAnswered++;
        this.send(conn, encodeHeaderPdu(COMMAND_ID.enquire_link_resp, sequenceNumber));
        return;
      case COMMAND_ID.deliver_sm:
      case COMMAND_ID.data_sm: // some SMSCs deliver receipts and MO this way; read and answered alike
        this.counters.deliversReceived++;
        this.handleDeliver(conn, raw, sequenceNumber, commandId);
        return;
      case COMMAND_ID.unbind:
        conn.closeReason ??= 'unbind from SMSC';
        if (this._state === 'bound') this.setState('unbinding');
        if (!conn.socket.writable) return;
        conn.socket.write(encodeHeaderPdu(COMMAND_ID.unbind_resp, sequenceNumber), () => {
          conn.socket.end();
          this.timer(conn, 1_000, () => conn.socket.destroy());
        });
        return;
      case COMMAND_ID.alert_notification:
      case COMMAND_ID.outbind:
        return; // no response defined
      default:
        // Known but unsupported → its *_resp with invalid command id; unknown → generic_nack.
        this.send(conn, encodeHeaderPdu(responseCommandId(commandId), sequenceNumber, SMPP_STATUS.ESME_RINVCMDID));
    }
  }

  /** deliver_sm or data_sm (`commandId`) from the SMSC: handed to the deliver handler, then answered. */
  private handleDeliver(conn: Connection, raw: Buffer, sequenceNumber: number, commandId: number): void {
    let view: DeliverSm;
    try {
      view = parseSmPdu(raw);
    } catch (err) {
      this.options.logger?.warn({ err, sequenceNumber, commandId }, 'SMPP deliver_sm could not be parsed');
      this.respondToDeliver(conn, sequenceNumber, SMPP_STATUS.ESME_RX_P_APPN, commandId);
      return;
    }
    const handler = this.deliverHandler;
    if (!handler) {
      // Nobody to take it: temporary error so the SMSC redelivers later.
      this.respondToDeliver(conn, sequenceNumber, SMPP_STATUS.ESME_RX_T_APPN, commandId);
      return;
    }
    void this.deliverAndRespond(conn, handler, view, sequenceNumber);
  }

  private async deliverAndRespond(conn: Connection, handler: DeliverHandler, view: DeliverSm, sequenceNumber: number): Promise<void> {
    let status = 0;
    try {
      // After the PDUs read with this one: a submit_sm_resp of the same chunk settles first.
      await Promise.resolve();
      await handler(view);
    } catch (err) {
      this.options.logger?.warn({ err, sequenceNumber }, 'SMPP deliver_sm handler failed');
      status = SMPP_STATUS.ESME_RX_T_APPN;
    }
    this.respondToDeliver(conn, sequenceNumber, status, view.commandId);
  }

  /** deliver_sm_resp, or data_sm_resp for a data_sm. */
  private respondToDeliver(conn: Connection, sequenceNumber: number, status: number, commandId: number): void {
    if (!conn.closed) this.send(conn, encodeDeliverSmResp(sequenceNumber, status, responseCommandId(commandId)));
  }

}

/** The next sequence number of a connection (SMPP 3.4 §5.1.4: they run 0x00000001..0x7FFFFFFF). */
function nextSequence(conn: Connection): number {
  return (conn.sequence = conn.sequence === 0x7fffffff ? 1 : conn.sequence + 1);
}

/** A submit waiter's resolve and reject: never called (`Waiter.submit`). */
function unused(): void {}

/** Whether a submit_sm written on `conn` still waits for its response. */
function hasSubmitWaiters(conn: Connection): boolean {
  for (const waiter of conn.waiters.values()) if (waiter.submit) return true;
  return false;
}

function encodeQueuedSubmit(sequence: number, item: QueuedSubmit): Buffer {
  return encodeSubmitSm(item.fields, sequence, item.options.tlvs);
}

// ---------------------------------------------------------------------------------------------
// Connection URL
// ---------------------------------------------------------------------------------------------

/** A bad connection URL; `part` names what is wrong (never the password's value). */
export class SmppUrlError extends Error {
  override name = 'SmppUrlError';
  constructor(
    readonly part: string,
    message: string,
  ) {
    super(`invalid SMPP URL: ${message}`);
  }
}

export interface SmppUrlOptions {
  host: string;
  port: number;
  tls: boolean;
  systemId: string;
  password: string;
  systemType: string;
  bindMode: BindMode;
  window: number;
  tps: number | null;
  responseTimeoutMs: number;
  enquireLinkIntervalMs: number;
  addrTon: number;
  addrNpi: number;
  addressRange: string;
  submitIdForm: MessageIdForm;
  receiptIdForm: MessageIdForm;
  /** ISO 3166 alpha-2 country of the SMSC's national numbers (an MO address of TON 2), or null. */
  country: string | null;
}

const BIND_ALIASES: Record<string, BindMode> = {
  transceiver: 'transceiver',
  trx: 'transceiver',
  transmitter: 'transmitter',
  tx: 'transmitter',
  receiver: 'receiver',
  rx: 'receiver',
};

const ID_FORMS: readonly MessageIdForm[] = ['auto', 'hex', 'dec', 'string'];

/**
 * Parses `smpp://system_id:password@host:port?bind=transceiver&window=10&tps=100&system_type=`
 * (`ssmpp://` or `smpps://` = TLS). Credentials are percent-decoded. Query keys: bind (transceiver|transmitter|
 * receiver, or trx|tx|rx), window (1..1000), tps (> 0; 0 or absent = unlimited), system_type,
 * timeout (response timeout, seconds), enquire_link (seconds, 0 = off), addr_ton, addr_npi,
 * address_range, submit_id / receipt_id (auto|hex|dec|string), country (ISO 3166 alpha-2: how the
 * SMSC's national numbers read). Unknown keys are errors.
 */
export function parseSmppUrl(input: string): SmppUrlOptions {
  // Check host and port first so their errors name them (URL() only says "Invalid URL").
  const authority = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(\[[^\]]*\]|[^:/?#]*)(?::([^/?#]*))?/i.exec(input.trim());
  if (authority) {
    if (!authority[1]) throw new SmppUrlError('host', 'host is missing');
    const rawPort = authority[2];
    if (rawPort !== undefined && rawPort !== '' && (!/^\d{1,5}$/.test(rawPort) || Number(rawPort) < 1 || Number(rawPort) > 65535)) {
      // The value is not echoed: in a URL with an unencoded '/' in the password it is part of the password.
      throw new SmppUrlError('port', 'port is not a number in 1-65535');
    }
  }
  let url: URL;
  try {
    url = new URL(input.trim());
  } catch {
    // URL's own error carries the input, password included: never rethrow it.
    throw new SmppUrlError('url', 'not a URL (expected smpp://system_id:password@host:port?...)');
  }
  const scheme = url.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'smpp' && scheme !== 'ssmpp' && scheme !== 'smpps') {
    throw new SmppUrlError('scheme', `scheme "${scheme}" is not smpp, smpps or ssmpp`);
  }
  // `smpps` is the spelling SMPP_URL accepts in config.ts; `ssmpp` is the smpp package's.
  const isTls = scheme === 'ssmpp' || scheme === 'smpps';
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!host) throw new SmppUrlError('host', 'host is missing');
  let port = isTls ? 3550 : 2775;
  if (url.port !== '') {
    port = Number(url.port);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new SmppUrlError('port', 'port is not a number in 1-65535');
  }
  if (url.pathname !== '' && url.pathname !== '/') {
    throw new SmppUrlError('path', 'unexpected path after host:port (percent-encode "/" in credentials)');
  }
  const decode = (part: string, value: string): string => {
    try {
      return decodeURIComponent(value);
    } catch {
      throw new SmppUrlError(part, `${part} is not valid percent-encoding`);
    }
  };
  const systemId = decode('system_id', url.username);
  const password = decode('password', url.password);
  if (!systemId) throw new SmppUrlError('system_id', 'system_id (user part) is missing');
  if (!/^[\x20-\x7e]*$/.test(systemId)) throw new SmppUrlError('system_id', 'system_id must be printable ASCII');
  if (!/^[\x20-\x7e]*$/.test(password)) throw new SmppUrlError('password', 'password must be printable ASCII');

  const result: SmppUrlOptions = {
    host,
    port,
    tls: isTls,
    systemId,
    password,
    systemType: '',
    bindMode: 'transceiver',
    window: 10,
    tps: null,
    responseTimeoutMs: 10_000,
    enquireLinkIntervalMs: 30_000,
    addrTon: 0,
    addrNpi: 0,
    addressRange: '',
    submitIdForm: 'auto',
    receiptIdForm: 'auto',
    country: null,
  };
  const seen = new Set<string>();
  const num = (key: string, value: string, min: number, max: number, integer: boolean): number => {
    const n = value.trim() === '' ? Number.NaN : Number(value);
    if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
      throw new SmppUrlError(key, `${key}="${value}" is not ${integer ? 'an integer' : 'a number'} in ${min}..${max}`);
    }
    return n;
  };
  for (const [key, value] of url.searchParams) {
    if (seen.has(key)) throw new SmppUrlError(key, `${key} is given more than once`);
    seen.add(key);
    switch (key) {
      case 'bind': {
        const mode = BIND_ALIASES[value.toLowerCase()];
        if (!mode) throw new SmppUrlError('bind', `bind="${value}" is not transceiver, transmitter or receiver`);
        result.bindMode = mode;
        break;
      }
      case 'window':
        result.window = num(key, value, 1, 1000, true);
        break;
      case 'tps': {
        const tps = num(key, value, 0, 100_000, false);
        result.tps = tps > 0 ? tps : null;
        break;
      }
      case 'system_type':
        if (value.length > 12) throw new SmppUrlError(key, 'system_type is longer than 12 characters');
        result.systemType = value;
        break;
      case 'timeout':
        result.responseTimeoutMs = Math.round(num(key, value, 0.1, 3600, false) * 1000);
        break;
      case 'enquire_link':
        result.enquireLinkIntervalMs = Math.round(num(key, value, 0, 3600, false) * 1000);
        break;
      case 'addr_ton':
        result.addrTon = num(key, value, 0, 255, true);
        break;
      case 'addr_npi':
        result.addrNpi = num(key, value, 0, 255, true);
        break;
      case 'address_range':
        result.addressRange = value;
        break;
      case 'submit_id':
      case 'receipt_id': {
        const form = value.toLowerCase() as MessageIdForm;
        if (!ID_FORMS.includes(form)) throw new SmppUrlError(key, `${key}="${value}" is not one of ${ID_FORMS.join(', ')}`);
        if (key === 'submit_id') result.submitIdForm = form;
        else result.receiptIdForm = form;
        break;
      }
      case 'country': {
        const country = value.toUpperCase();
        if (!isValidCountry(country)) throw new SmppUrlError(key, `country="${value}" is not an ISO 3166 alpha-2 code with a calling code (e.g. CZ)`);
        result.country = country;
        break;
      }
      default:
        throw new SmppUrlError(key, `unknown parameter "${key}"`);
    }
  }
  return result;
}
