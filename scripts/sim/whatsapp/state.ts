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

  constructor(readonly seed: WhatsappSeed, private readonly maxMessages: number) {
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
    this.records.push(m);
    if (this.records.length > this.maxMessages * 1.25) this.records.splice(0, this.records.length - this.maxMessages);
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
