/**
 * What a status batch needs to know of a message that never changes after acceptance, kept per
 * process. Dispatch reads these facts for every job (with the rest of the message row) and remembers
 * them here. The status batches that apply the same attempts' submit responses and receipts, in the
 * same process as a rule, then take them from here. Without this cache, the batch's attempt SELECT
 * would join `messages` for every attempt: a lookup by a text key, and jsonb operators on the flow.
 * Anything missing is read from Postgres in one statement. Mutable message state (the dispatch flag,
 * a schedule) and everything of the key (its default callback URL may change: D4 takes its value
 * when the event is written) stay in the SELECT.
 */
import type { Queryable } from '../db/pool.js';
import { prepared } from '../db/pool.js';
import { textArray } from '../db/arrays.js';
import type { FlowStep } from '../channels/index.js';

export interface MessageFacts {
  id: string;
  request_id: string;
  /** The stored payload text (json column), or null. */
  payload: string | null;
  callback: string | null;
  flow: FlowStep[];
  lane: number;
  source: string;
}

/**
 * Bytes one entry holds on the heap besides its strings: the facts object, the parsed flow, the
 * wrapper and the map slot (measured; docs/benchmarks.md).
 */
const ENTRY_OVERHEAD = 800;

export class MessageFactsCache {
  private readonly facts = new Map<string, { facts: MessageFacts; bytes: number }>();
  private bytes = 0;

  /** `maxBytes`: a bound on what the entries hold (oldest entries go first). */
  constructor(private readonly maxBytes = 16 * 1024 * 1024) {}

  get size(): number {
    return this.facts.size;
  }

  get(id: string): MessageFacts | undefined {
    return this.facts.get(id)?.facts;
  }

  remember(f: MessageFacts): void {
    if (this.facts.has(f.id)) {
      return;
    }
    // Strings count twice (UTF-16 at worst); a payload may be large, the rest is short.
    const bytes = ENTRY_OVERHEAD + 2 * (f.id.length + f.request_id.length + (f.payload?.length ?? 0) + (f.callback?.length ?? 0) + f.source.length);
    this.facts.set(f.id, { facts: { id: f.id, request_id: f.request_id, payload: f.payload, callback: f.callback, flow: f.flow, lane: f.lane, source: f.source }, bytes });
    this.bytes += bytes;
    // A Map iterates in insertion order: the first keys are the oldest.
    for (const [id, entry] of this.facts) {
      if (this.bytes <= this.maxBytes) break;
      this.facts.delete(id);
      this.bytes -= entry.bytes;
    }
  }

  /** The facts of `ids`: from memory, and what is missing in one statement (then remembered). */
  async load(db: Queryable, ids: Iterable<string>): Promise<Map<string, MessageFacts>> {
    const found = new Map<string, MessageFacts>();
    const missing = new Set<string>();
    for (const id of ids) {
      const f = this.get(id);
      if (f) {
        found.set(id, f);
      } else {
        missing.add(id);
      }
    }
    if (missing.size > 0) {
      const { rows } = await db.query<MessageFacts>(prepared(
        'SELECT id, request_id, payload, callback, flow, lane, source FROM messages WHERE id = ANY($1)', [textArray([...missing])]));
      for (const row of rows) {
        this.remember(row);
        found.set(row.id, row);
      }
    }
    return found;
  }
}
