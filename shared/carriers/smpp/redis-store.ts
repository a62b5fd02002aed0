/**
 * What an SMPP connection keeps in Redis, shared by every process bound over it. All keys start
 * with `<redisPrefix>:smpp:<connection>:` and expire on their own. On a Redis Cluster the base is
 * the hash tag `{<redisPrefix>:smpp:<connection>}` (`keyGroup`): every key of a connection is in
 * one slot, so the pipelines, MGETs and scripts below may name several of them.
 *
 * - `acc64:<bucket>` (hash, 6 h after its last write; an attempt's fields are deleted once its
 *   hand-over is committed, `forgetAccepted`): the refs of the parts the SMSC accepted,
 *   field `<attemptId>:<part>` → ref ('' when it gave no message_id), for the attempts numbered
 *   `bucket * 64` to `bucket * 64 + 63`. A re-hand of the same attempt (dispatch job retried
 *   after a crash or a failed send) skips those parts, so the SMSC never gets an accepted part
 *   twice; the concatenation reference is derived from the attempt id, so the resumed parts still
 *   join on the handset. Attempt ids are consecutive, so the parts accepted in one tick fall in
 *   a few hashes: one HSET each instead of a SET with its own expiry per part (measured in
 *   docs/benchmarks.md). Field `<attemptId>:<part>:w` → '1' marks a part of an at-most-once attempt
 *   as written to the link (recorded before the write): without an answer beside it, a re-hand
 *   does not send it again. Why 64: Redis keeps a hash of up to `hash-max-listpack-entries`
 *   fields (512 by default) as one flat list, in which every HSET field is a scan of the list and
 *   a move of its tail; a hash of 1,024 attempts stayed such a list for its first hundreds of
 *   fields and cost Redis ~2.7 µs per accepted part, one of 64 ~0.7 (docs/benchmarks.md,
 *   thirty-fifth session). Earlier versions wrote the same fields in
 *   `acc:<attemptId div 1024>` (until 2026-11-29), before that `att:<attemptId>:<part>` strings
 *   (until 2026-11-25) and before that a hash `att:<attemptId>` (`p<index>` → ref, `c` →
 *   reference); a re-hand still reads all three, for an upgrade from any of those versions
 *   (`forgetAccepted` deletes only `acc64:` fields: what those versions wrote expires).
 * - `id:<ref>` (string, step ttl + 1 day): the submit ids registered while the connection still
 *   learns how its SMSC writes ids in receipts (`auto` forms, see id-forms.ts): one key per id,
 *   its ref, which the receipts' readings are looked up against. Not written once the form is known.
 * - `idform:<smsc>` (string, no expiry): the learned relation (`same`, `hex-dec`, `dec-hex`) of the
 *   SMSC at `<smsc>` (a hash of host, port and system_id), shared by every process and bind.
 * - `rcpt:parked` (hash, refreshed on each write, expires after the bound it is kept for): receipts
 *   whose id had several readings before the form was learned, field `<id> <state>` → the report
 *   as JSON; applied once the form is known, dropped with a warning after the bound.
 * - `mo:<src>:<dst>:<bits>:<ref>:<total>` (hash, 10 min): parts of a concatenated inbound SMS, so
 *   parts that arrive over different binds (processes) are still joined.
 */
import { luaScript, runScript, type Redis } from '../../redis.js';
import type { AttemptState } from '../types.js';
import { pushTo } from '../../collections.js';

const ATTEMPT_TTL_S = 6 * 3600;
/** Consecutive attempt ids that share one `acc64:` hash (see the top of this file for why 64). */
const ATTEMPTS_PER_HASH = 64;
/** The same for the `acc:` hashes versions before 2026-11-29 wrote (read on a re-hand only). */
const ATTEMPTS_PER_LEGACY_HASH = 1024;
/** Parts one concatenated SMS can have (8-bit part count). */
const MAX_PARTS = 255;
const MO_TTL_S = 10 * 60;

/**
 * Adds one MO part; returns every stored part (seq → value) once all `total` are there, else nil.
 * KEYS[1]  `mo:<message key>` (one key: any slot)
 * ARGV     seq, value, total, ttl (s)
 */
const MO_PART_LUA = luaScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return redis.call('HGETALL', KEYS[1])
end
return false
`);

/**
 * Indexes accepted ids while the connection's id form is being learned.
 * KEYS[1]   the learned relation of the connection's SMSC (`idform:<smsc>`)
 * KEYS[2..] `id:<ref>` keys, one per accepted id
 *           Every key under the connection's base: on a cluster they share its hash tag
 *           `{<redisPrefix>:smpp:<connection>}` (the idform key is the namespace's, which is the
 *           connection itself for every connection that submits).
 * ARGV[2i-1], ARGV[2i]  ref and ttl (s) of KEYS[i + 1]
 * Returns the learned relation, writing nothing, once there is one; else false after indexing.
 */
const INDEX_IDS_LUA = luaScript(`
local learned = redis.call('GET', KEYS[1])
if learned then return learned end
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[2 * i - 3], 'EX', tonumber(ARGV[2 * i - 2]))
end
return false
`);

export interface AcceptedParts {
  /** Concatenation reference of the parts already accepted when a legacy hash named it; else null (derive it). */
  concatRef: number | null;
  /** Part index → ref ('' when the SMSC gave no message_id). */
  parts: Map<number, string>;
  /** Parts written to the link (recorded before writing, at-most-once attempts only) that got no answer. */
  unanswered: Set<number>;
}

/** The `acc64:` hash field that marks a part of an at-most-once attempt as written to the link. */
const writtenField = (attemptId: number, part: number): string => `${attemptId}:${part}:w`;

export interface AcceptedPart {
  attemptId: number;
  part: number;
  ref: string;
  /** Index the ref for receipts (while the id form is learned). */
  index: boolean;
  idTtlSeconds: number;
}

/** A receipt kept until the connection's id form is known. */
export interface ParkedReceipt {
  id: string;
  state: AttemptState;
  resultInfo: string;
  at: number;
  parkedAt: number;
}

const PARKED_FIELD_SEP = ' ';

/**
 * Collects calls made in one tick and runs them as one batch on the next turn of the event loop.
 * `run` returns one result per input, in order; when it throws, every call of the batch rejects.
 */
class TickBatcher<I, O> {
  private inputs: I[] = [];
  private waiters: Array<{ resolve(value: O): void; reject(err: unknown): void }> = [];

  constructor(private readonly run: (inputs: I[]) => Promise<O[]>) {}

  add(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.inputs.push(input);
      if (this.waiters.push({ resolve, reject }) === 1) setImmediate(this.flush);
    });
  }

  // Loops rather than arrows made per call (docs/architecture.md, "Hot loops").
  private readonly flush = async (): Promise<void> => {
    const inputs = this.inputs;
    const waiters = this.waiters;
    this.inputs = [];
    this.waiters = [];
    try {
      const results = await this.run(inputs);
      for (let i = 0; i < waiters.length; i++) waiters[i]!.resolve(results[i]!);
    } catch (err) {
      for (const w of waiters) w.reject(err);
    }
  };
}

/**
 * A TickBatcher for writes that answer nothing: every call of one tick gets the same promise, its
 * batch's, so a call costs no promise, closure or waiter of its own (one per accepted part).
 */
class TickWrites<I> {
  private inputs: I[] = [];
  private batch: Promise<void> | null = null;
  private settle: { resolve(): void; reject(err: unknown): void } | null = null;

  constructor(private readonly run: (inputs: I[]) => Promise<void>) {}

  add(input: I): Promise<void> {
    this.inputs.push(input);
    if (this.batch === null) {
      this.batch = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
      setImmediate(this.flush);
    }
    return this.batch;
  }

  private readonly flush = async (): Promise<void> => {
    const inputs = this.inputs;
    const settle = this.settle!;
    this.inputs = [];
    this.batch = null;
    this.settle = null;
    try {
      await this.run(inputs);
      settle.resolve();
    } catch (err) {
      settle.reject(err);
    }
  };
}

/** Throws the first error of a pipeline's results. */
function failedOf(results: Array<[Error | null, unknown]> | null): void {
  for (const [err] of results ?? []) if (err) throw err;
}

export class SmppRedisStore {
  /** Told the learned id relation when an index write finds one (see INDEX_IDS_LUA). */
  onIdForm: ((value: string) => void) | null = null;
  /** `idform:<smsc>` of this connection's SMSC (set by the carrier). */
  idFormKey: string;

  constructor(
    private readonly redis: Redis,
    /** `<redisPrefix>:smpp:<connection>`, or `{<redisPrefix>:smpp:<connection>}` on a cluster (`keyGroup`). */
    private readonly base: string,
  ) {
    this.idFormKey = `${base}:idform`;
  }

  /** Parts already accepted, per attempt of `partCount` parts (attempts with none are absent). */
  async acceptedParts(attempts: Array<{ attemptId: number; partCount: number }>): Promise<Map<number, AcceptedParts>> {
    const out = new Map<number, AcceptedParts>();
    if (attempts.length === 0) return out;
    const pipeline = this.redis.pipeline();
    for (const { attemptId, partCount } of attempts) {
      // At least one field (HMGET and MGET take one or more) and at most the 255 parts a message can have.
      const count = Math.min(MAX_PARTS, Math.max(1, partCount));
      const fields: string[] = [];
      const legacyKeys: string[] = [];
      for (let part = 0; part < count; part++) {
        fields.push(`${attemptId}:${part}`);
        legacyKeys.push(`${this.base}:att:${attemptId}:${part}`);
      }
      for (let part = 0; part < count; part++) fields.push(writtenField(attemptId, part));
      pipeline.hmget(this.acceptedKey(attemptId), ...fields);
      pipeline.hmget(this.legacyAcceptedKey(attemptId), ...fields);
      pipeline.mget(legacyKeys); // written until 2026-11-25 (see the top of this file)
      pipeline.hgetall(`${this.base}:att:${attemptId}`); // written before that
    }
    const results = (await pipeline.exec()) ?? [];
    attempts.forEach(({ attemptId, partCount }, i) => {
      const parts = new Map<number, string>();
      const written = new Set<number>();
      const count = Math.min(MAX_PARTS, Math.max(1, partCount));
      // Forms 0 and 1 (the hashes) hold the refs and then the written marks; form 2 the refs only.
      for (let form = 0; form < 3; form++) {
        const [err, refs] = results[4 * i + form] ?? [null, null];
        if (err) throw err;
        ((refs ?? []) as Array<string | null>).forEach((ref, at) => {
          if (form < 2 && at >= count) {
            if (ref !== null) written.add(at - count);
            return;
          }
          if (ref !== null && !parts.has(at)) parts.set(at, ref);
        });
      }
      const [errLegacy, legacy] = results[4 * i + 3] ?? [null, null];
      if (errLegacy) throw errLegacy;
      const hash = (legacy ?? {}) as Record<string, string>;
      for (const [field, ref] of Object.entries(hash)) {
        const m = /^p(\d+)$/.exec(field);
        if (m && !parts.has(Number(m[1]))) parts.set(Number(m[1]), ref);
      }
      const unanswered = new Set([...written].filter((part) => !parts.has(part)));
      if (parts.size === 0 && unanswered.size === 0) return;
      const c = Number(hash.c);
      out.set(attemptId, { concatRef: hash.c !== undefined && Number.isInteger(c) ? c : null, parts, unanswered });
    });
    return out;
  }

  /**
   * Forgets the accepted parts (and written marks) of attempts whose hand-over is committed to
   * Postgres: the engine hands such an attempt over no more, so nothing reads them again, and
   * Redis keeps only the attempts still under way instead of 6 h of traffic. One HDEL per hash.
   */
  async forgetAccepted(attempts: ReadonlyArray<{ attemptId: number; partCount: number; atMostOnce: boolean }>): Promise<void> {
    const byHash = new Map<string, string[]>();
    for (const { attemptId, partCount, atMostOnce } of attempts) {
      const key = this.acceptedKey(attemptId);
      for (let part = 0; part < Math.min(MAX_PARTS, partCount); part++) {
        pushTo(byHash, key, `${attemptId}:${part}`);
        if (atMostOnce) pushTo(byHash, key, writtenField(attemptId, part));
      }
    }
    if (byHash.size === 0) return;
    const pipeline = this.redis.pipeline();
    for (const [key, fields] of byHash) pipeline.hdel(key, ...fields);
    failedOf(await pipeline.exec());
  }

  /**
   * Records that a part of an at-most-once attempt is about to be written to the link. Resolves
   * once Redis has it (writes of one tick share one pipeline): only then may the part be written.
   */
  recordWritten(attemptId: number, part: number): Promise<void> {
    return this.writtenMarks.add({ attemptId, part });
  }

  private readonly writtenMarks = new TickWrites<{ attemptId: number; part: number }>(async (inputs) => {
    const byHash = new Map<string, string[]>();
    for (const input of inputs) {
      const key = this.acceptedKey(input.attemptId);
      pushTo(byHash, key, writtenField(input.attemptId, input.part));
      pushTo(byHash, key, '1');
    }
    const pipeline = this.redis.pipeline();
    for (const [key, fields] of byHash) {
      pipeline.hset(key, ...fields);
      pipeline.expire(key, ATTEMPT_TTL_S);
    }
    failedOf(await pipeline.exec());
  });

  private acceptedKey(attemptId: number): string {
    return `${this.base}:acc64:${Math.floor(attemptId / ATTEMPTS_PER_HASH)}`;
  }

  /** The hash versions before 2026-11-29 recorded the same fields in (read on a re-hand only). */
  private legacyAcceptedKey(attemptId: number): string {
    return `${this.base}:acc:${Math.floor(attemptId / ATTEMPTS_PER_LEGACY_HASH)}`;
  }

  /**
   * Records an accepted part, and (with `index`) indexes its ref for receipts while the id form
   * is learned. Records made in the same tick (a window's worth of submit_sm_resp) share one
   * pipeline and one script call.
   */
  recordAccepted(input: AcceptedPart): Promise<void> {
    return this.writes.add(input);
  }

  /**
   * Which of `refs` are indexed, and the learned id relation if there is one; lookups of one tick
   * share one MGET.
   */
  async lookupIds(refs: string[]): Promise<{ idForm: string | null; indexed: Set<string> }> {
    const lookups: Array<Promise<string | null>> = [this.reads.add(this.idFormKey)];
    for (const ref of refs) lookups.push(this.reads.add(`${this.base}:id:${ref}`));
    const [idForm, ...found] = await Promise.all(lookups);
    const indexed = new Set<string>();
    refs.forEach((ref, i) => {
      if (found[i] !== null && found[i] !== undefined) indexed.add(ref);
    });
    return { idForm: idForm ?? null, indexed };
  }

  /** Removes an indexed ref (its final receipt was applied). */
  async forgetIndexed(ref: string): Promise<void> {
    await this.redis.del(`${this.base}:id:${ref}`);
  }

  /** Stores the learned id relation unless one is stored already; returns the one stored. */
  async saveIdForm(value: string): Promise<string> {
    const previous = await this.redis.set(this.idFormKey, value, 'NX', 'GET');
    return previous ?? value;
  }

  /** Keeps a receipt until the id form is known (for at most `keepSeconds` after the last one). */
  async parkReceipt(receipt: ParkedReceipt, keepSeconds: number): Promise<void> {
    const key = `${this.base}:rcpt:parked`;
    await this.redis.pipeline()
      .hset(key, `${receipt.id}${PARKED_FIELD_SEP}${receipt.state}`, JSON.stringify(receipt))
      .expire(key, keepSeconds)
      .exec()
      .then(failedOf);
  }

  /** Every parked receipt, by its field. */
  async parkedReceipts(): Promise<Map<string, ParkedReceipt>> {
    const all = await this.redis.hgetall(`${this.base}:rcpt:parked`);
    const out = new Map<string, ParkedReceipt>();
    for (const [field, value] of Object.entries(all)) {
      try {
        out.set(field, JSON.parse(value) as ParkedReceipt);
      } catch {
        out.set(field, { id: field.split(PARKED_FIELD_SEP)[0] ?? '', state: 'sent', resultInfo: '', at: 0, parkedAt: 0 });
      }
    }
    return out;
  }

  async forgetParked(fields: string[]): Promise<void> {
    if (fields.length > 0) await this.redis.hdel(`${this.base}:rcpt:parked`, ...fields);
  }

  private readonly writes = new TickWrites<AcceptedPart>(async (inputs) => {
    // One HSET per hash of consecutive attempts, not a command per part: building and encoding
    // each command costs more in the client than the command costs in Redis.
    const byHash = new Map<string, string[]>();
    const idKeys: string[] = [];
    const idArgs: Array<string | number> = [];
    for (const input of inputs) {
      const key = this.acceptedKey(input.attemptId);
      pushTo(byHash, key, `${input.attemptId}:${input.part}`);
      pushTo(byHash, key, input.ref);
      if (input.index && input.ref !== '') {
        idKeys.push(`${this.base}:id:${input.ref}`);
        idArgs.push(input.ref, input.idTtlSeconds);
      }
    }
    const pipeline = this.redis.pipeline();
    for (const [key, fields] of byHash) {
      pipeline.hset(key, ...fields);
      pipeline.expire(key, ATTEMPT_TTL_S);
    }
    const [results, learned] = await Promise.all([
      pipeline.exec(),
      idKeys.length > 0 ? runScript(this.redis, INDEX_IDS_LUA, [this.idFormKey, ...idKeys], idArgs) : null,
    ]);
    failedOf(results);
    if (typeof learned === 'string') this.onIdForm?.(learned);
  });

  private readonly reads = new TickBatcher<string, string | null>(async (names) => {
    const values = await this.redis.mget(...names);
    const found: Array<string | null> = [];
    for (let i = 0; i < names.length; i++) {
      found.push(values[i] ?? null);
    }
    return found;
  });

  /** Stores one MO part; returns all parts (seq → stored value) when the message is complete. */
  async addMoPart(messageKey: string, seq: number, value: string, total: number): Promise<Map<number, string> | null> {
    const reply = await runScript(this.redis, MO_PART_LUA, [`${this.base}:mo:${messageKey}`], [seq, value, total, MO_TTL_S]);
    if (!Array.isArray(reply)) return null;
    const parts = new Map<number, string>();
    for (let i = 0; i + 1 < reply.length; i += 2) parts.set(Number(reply[i]), String(reply[i + 1]));
    return parts;
  }

  /** Forgets a completed MO message (after it was stored by the engine). */
  async clearMo(messageKey: string): Promise<void> {
    await this.redis.del(`${this.base}:mo:${messageKey}`);
  }
}
