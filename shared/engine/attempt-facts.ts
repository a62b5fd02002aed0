/**
 * What a status batch needs to know of an attempt that never changes after dispatch wrote it, kept
 * per process (message-facts.ts does the same for messages). Dispatch remembers the facts of the
 * attempts it hands over, once their transaction has committed. The status batches that apply
 * those attempts' submit responses and receipts, in the same process as a rule, then lock and read
 * only what changes (state, flags, the recipient's step, the key's default callback URL). Parsing
 * the whole row twice per recipient was the largest part of a status batch's client-side cost
 * (docs/benchmarks.md, eighteenth session). Anything missing (another process dispatched it, a
 * restart, an entry already let go) is read from Postgres in one statement and remembered.
 *
 * Nothing here can go stale: these columns are written by the attempt's INSERT and by nothing else
 * (`UPDATE attempts` sets state, result_info, flags and times only). An attempt that reaches a final
 * state is let go (a later report of it, a duplicate or `seen`, reads it again), and the oldest
 * entries go first beyond `maxEntries`.
 */
import { prepared, type Queryable } from '../db/pool.js';
import { numberArray } from '../db/arrays.js';
import type { Channel } from '../channels/index.js';

/** Column names as Postgres returns them, so a row read on a miss is an entry as it is. */
export interface AttemptFacts {
  id: number;
  recipient_id: number;
  step: number;
  channel: Channel;
  phone: string;
  sender: string;
  parts: number;
  country: number;
  operator: number;
  price_czk: number;
  price_eur: number;
  charged: number;
  payer_kind: 'account' | 'key' | null;
  payer_id: number | null;
  charged_currency: 'CZK' | 'EUR' | null;
  /** The recipient's. */
  public_id: string;
  account_id: number;
  key_id: number;
  message_id: string;
}

/**
 * The facts' columns, over `attempts a JOIN recipients r ON r.id = a.recipient_id`. The recipient's
 * account and key are the message's, which dispatch remembers; the recipient row says so here.
 */
export const ATTEMPT_FACT_COLUMNS = `a.id, a.recipient_id, a.step, a.channel, a.phone, a.sender, a.parts, a.country, a.operator,
            a.price_czk, a.price_eur, a.charged, a.payer_kind, a.payer_id, a.charged_currency,
            r.public_id, r.account_id, r.key_id, r.message_id`;

/** The facts of attempts as stored (`$1`: their ids). */
const FACTS_SQL = `SELECT ${ATTEMPT_FACT_COLUMNS}
       FROM attempts a JOIN recipients r ON r.id = a.recipient_id
      WHERE a.id = ANY($1)`;

/** Only the facts of a row that holds more (an entry keeps nothing that changes). */
export function factsOf(row: AttemptFacts): AttemptFacts {
  return {
    id: row.id, recipient_id: row.recipient_id, step: row.step, channel: row.channel, phone: row.phone, sender: row.sender,
    parts: row.parts, country: row.country, operator: row.operator, price_czk: row.price_czk, price_eur: row.price_eur,
    charged: row.charged, payer_kind: row.payer_kind, payer_id: row.payer_id, charged_currency: row.charged_currency,
    public_id: row.public_id, account_id: row.account_id, key_id: row.key_id, message_id: row.message_id,
  };
}

export class AttemptFactsCache {
  private readonly facts = new Map<number, AttemptFacts>();

  /**
   * `maxEntries`: a bound on what is kept (an entry with its own strings holds ~400 bytes of heap,
   * measured in Node, so the default is ~8 MB). In-flight attempts are all it holds while their
   * receipts arrive within seconds.
   */
  constructor(private readonly maxEntries = 20_000) {}

  get size(): number {
    return this.facts.size;
  }

  get(id: number): AttemptFacts | undefined {
    return this.facts.get(id);
  }

  /** Whether any of `ids` is known here. */
  knowsAny(ids: readonly number[]): boolean {
    for (const id of ids) {
      if (this.facts.has(id)) return true;
    }
    return false;
  }

  remember(f: AttemptFacts): void {
    if (this.facts.has(f.id)) {
      return;
    }
    this.facts.set(f.id, f);
    if (this.facts.size > this.maxEntries) {
      // A Map iterates in insertion order: the first key is the oldest.
      this.facts.delete(this.facts.keys().next().value!);
    }
  }

  /** The attempt reached a final state: its reports are done as a rule. */
  forget(id: number): void {
    this.facts.delete(id);
  }

  /** The facts of `ids`: from memory, and what is missing in one statement (then remembered). */
  async load(db: Queryable, ids: readonly number[]): Promise<Map<number, AttemptFacts>> {
    const found = new Map<number, AttemptFacts>();
    const missing: number[] = [];
    for (const id of ids) {
      const f = this.facts.get(id);
      if (f) {
        found.set(id, f);
      } else {
        missing.push(id);
      }
    }
    if (missing.length > 0) {
      const { rows } = await db.query<AttemptFacts>(prepared(FACTS_SQL, [numberArray(missing)]));
      for (const row of rows) {
        this.remember(row);
        found.set(row.id, row);
      }
    }
    return found;
  }
}
