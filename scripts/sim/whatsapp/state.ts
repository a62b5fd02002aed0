/**
 * The WhatsApp simulator's memory: what the seed says plus what happened since (tokens minted by
 * code exchanges, subscriptions, registrations, signup codes, customers' last inbound messages,
 * messages sent). Everything is bounded; `reset()` goes back to the seed.
 */
import { randomBytes } from 'node:crypto';
import type { SeedNumber, SeedTemplate, SeedWaba, WhatsappSeed } from './seed.js';

export interface WabaState {
  seed: SeedWaba;
  /** Our app is subscribed to the WABA's webhooks. */
  subscribed: boolean;
  /** Per-WABA callback set with `subscribed_apps`' `override_callback_uri`. */
  override?: { url: string; verifyToken: string };
  /** Listed in `client_whatsapp_business_accounts`. */
  shared: boolean;
  /** A signup exchanged its code for this WABA; `PARTNER_ADDED` follows its subscription. */
  partnerAddedDue: boolean;
}

export interface NumberState {
  seed: SeedNumber;
  pin?: string;
  status: string;
}

export interface SignupCode {
  code: string;
  waba_id: string;
  phone_number_id: string;
  business_id: string;
  used: boolean;
  issued_at: string;
}

/** A send the simulator answered, as `GET /_sim/messages` shows it. */
export interface SimMessage {
  /** The wamid given; null when the send was refused. */
  id: string | null;
  at: string;
  phone_number_id: string;
  waba_id: string;
  to: string;
  type: string;
  text?: string;
  template?: { name: string; language: string; components?: unknown[] };
  biz_opaque_callback_data?: string;
  http_status: number;
  error?: { code: number; title: string };
  /** Statuses scheduled for it, in the order sent. */
  statuses: string[];
}

const MAX_CODES = 1000;
const MAX_INBOUND_KEYS = 200_000;
const MAX_FLAKY_KEYS = 100_000;
/** Numbers whose accepted sends are counted (`sendCounts`; the benchmark sends to at most 1,005,000); beyond it new numbers are not. */
const MAX_COUNTED_NUMBERS = 1_100_000;
/** Repeated numbers `sendCounts` lists. */
const MAX_LISTED_REPEATS = 1000;

/** Accepted sends per number since the last reset of the counts: "was anyone sent a message twice?". */
export interface SendCounts {
  /** Whether the simulator counts (its `countSends` option); all zero when not. */
  counting: boolean;
  /** Distinct numbers Meta took a send to. */
  destinations: number;
  /** Sends taken (a wamid given). */
  sends: number;
  /** Numbers taken more than once, with their counts (at most 1,000 listed). */
  repeated: Array<[string, number]>;
  repeatedCount: number;
  /** More numbers than the counter keeps: later ones were not counted. */
  truncated: boolean;
}

export class SimState {
  readonly tokens = new Map<string, Set<string>>();
  readonly wabas = new Map<string, WabaState>();
  readonly numbers = new Map<string, NumberState>();
  readonly businesses = new Map<string, string>();
  /** Templates per WABA id. */
  readonly templates = new Map<string, SeedTemplate[]>();
  readonly codes = new Map<string, SignupCode>();
  /** Last inbound per `<phone_number_id> <user number or BSUID>` (unix ms). */
  readonly lastInbound = new Map<string, number>();
  /** Failed tries so far of the 06 outcome per message key. */
  readonly flaky = new Map<string, number>();
  private records: SimMessage[] = [];
  private readonly accepted = new Map<string, number>();
  private acceptedSends = 0;
  private countsTruncated = false;

  constructor(readonly seed: WhatsappSeed, private readonly maxMessages: number, private readonly countSends = false) {
    this.reset();
  }

  reset(): void {
    this.tokens.clear();
    this.wabas.clear();
    this.numbers.clear();
    this.businesses.clear();
    this.templates.clear();
    this.codes.clear();
    this.lastInbound.clear();
    this.flaky.clear();
    this.records = [];
    this.resetSendCounts();
    for (const b of this.seed.businesses) this.businesses.set(b.id, b.name);
    for (const t of this.seed.tokens) this.tokens.set(t.token, new Set(t.wabas));
    for (const w of this.seed.wabas) this.wabas.set(w.id, { seed: w, subscribed: this.seed.tokens.some((t) => t.wabas.includes(w.id)), shared: w.shared === true, partnerAddedDue: false });
    for (const n of this.seed.numbers) {
      const state: NumberState = { seed: n, status: n.status ?? (n.pin ? 'CONNECTED' : 'PENDING') };
      if (n.pin !== undefined) state.pin = n.pin;
      this.numbers.set(n.id, state);
    }
    for (const t of this.seed.templates) {
      const list = this.templates.get(t.waba_id) ?? [];
      list.push(t);
      this.templates.set(t.waba_id, list);
    }
  }

  /** Mints a token for these WABAs (a code exchange's business token). */
  mintToken(wabas: string[]): string {
    const token = `EAAsim${randomBytes(24).toString('base64url')}`;
    this.tokens.set(token, new Set(wabas));
    return token;
  }

  issueCode(wabaId: string | undefined): SignupCode {
    const signup = this.seed.signup;
    const waba = this.wabas.get(wabaId ?? signup.waba_id);
    if (!waba) throw new Error(`no WABA ${wabaId ?? ''}`);
    const number = waba.seed.id === signup.waba_id ? signup.phone_number_id : ([...this.numbers.values()].find((n) => n.seed.waba_id === waba.seed.id)?.seed.id ?? '');
    const code: SignupCode = {
      code: `AQ${randomBytes(32).toString('base64url')}`, waba_id: waba.seed.id, phone_number_id: number,
      business_id: waba.seed.owner_business_id, used: false, issued_at: new Date().toISOString(),
    };
    if (this.codes.size >= MAX_CODES) this.codes.delete(this.codes.keys().next().value!);
    this.codes.set(code.code, code);
    return code;
  }

  noteInbound(phoneNumberId: string, user: string, at: number): void {
    const key = `${phoneNumberId} ${user}`;
    this.lastInbound.delete(key);
    if (this.lastInbound.size >= MAX_INBOUND_KEYS) this.lastInbound.delete(this.lastInbound.keys().next().value!);
    this.lastInbound.set(key, at);
  }

  /** How many times the 06 outcome already failed this message; counts this try. */
  flakyTry(key: string): number {
    const n = this.flaky.get(key) ?? 0;
    if (n === 0 && this.flaky.size >= MAX_FLAKY_KEYS) this.flaky.clear();
    this.flaky.set(key, n + 1);
    return n;
  }

  record(m: SimMessage): void {
    if (m.id !== null && this.countSends) this.countSend(m.to);
    this.records.push(m);
    if (this.records.length > this.maxMessages * 1.25) this.records.splice(0, this.records.length - this.maxMessages);
  }

  private countSend(to: string): void {
    this.acceptedSends++;
    const n = this.accepted.get(to);
    if (n !== undefined) this.accepted.set(to, n + 1);
    else if (this.accepted.size < MAX_COUNTED_NUMBERS) this.accepted.set(to, 1);
    else this.countsTruncated = true;
  }

  sendCounts(): SendCounts {
    const repeated: Array<[string, number]> = [];
    let repeatedCount = 0;
    for (const [to, n] of this.accepted) {
      if (n < 2) continue;
      repeatedCount++;
      if (repeated.length < MAX_LISTED_REPEATS) repeated.push([to, n]);
    }
    return { counting: this.countSends, destinations: this.accepted.size, sends: this.acceptedSends, repeated, repeatedCount, truncated: this.countsTruncated };
  }

  resetSendCounts(): void {
    this.accepted.clear();
    this.acceptedSends = 0;
    this.countsTruncated = false;
  }

  /** Sends, newest first, optionally to one number (digits, `+` ignored). */
  messages(to?: string, limit = 100): SimMessage[] {
    const want = to?.replace(/^\+/, '');
    const out: SimMessage[] = [];
    for (let i = this.records.length - 1; i >= 0 && out.length < limit; i--) {
      const m = this.records[i]!;
      if (want === undefined || m.to === want) out.push(m);
    }
    return out;
  }
}
