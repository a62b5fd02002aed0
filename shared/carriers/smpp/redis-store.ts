/**
 * What an SMPP connection keeps in Redis, shared by every process bound over it. All keys start
 * with `<redisPrefix>:smpp:<connection>:` and expire on their own:
 *
 * - `acc:<bucket>` (hash, 6 h after its last write): the refs of the parts the SMSC accepted,
 *   field `<attemptId>:<part>` → ref ('' when it gave no message_id), for the attempts numbered
 *   `bucket * 1024` to `bucket * 1024 + 1023`. A re-hand of the same attempt (dispatch job retried
 *   after a crash or a failed send) skips those parts, so the SMSC never gets an accepted part
 *   twice; the concatenation reference is derived from the attempt id, so the resumed parts still
 *   join on the handset. Attempt ids are consecutive, so the parts accepted in one tick fall in
 *   one or two hashes: one HSET each instead of a SET with its own expiry per part (measured in
 *   docs/benchmarks.md). Earlier versions wrote `att:<attemptId>:<part>` strings (until
 *   2026-11-25) and before that a hash `att:<attemptId>` (`p<index>` → ref, `c` → reference); a
 *   re-hand still reads both until those have expired.
 * - `id:<key>` (string, step ttl + 1 day): receipt-id index, written only when a connection's id
 *   forms are `auto`. Each canonical key of a submit_sm_resp id (see `normalizeMessageId`) points
 *   at the ref registered with the engine, so a receipt naming the same message in another form
 *   (decimal for a hex id, other case, leading zeros) finds it.
 * - `mo:<src>:<dst>:<bits>:<ref>:<total>` (hash, 10 min): parts of a concatenated inbound SMS, so
 *   parts that arrive over different binds (processes) are still joined.
 */
import type { Redis } from 'ioredis';
import { luaScript, runScript } from '../../redis.js';
import { pushTo } from '../../collections.js';

const ATTEMPT_TTL_S = 6 * 3600;
/** Consecutive attempt ids that share one `acc:` hash. */
const ATTEMPTS_PER_HASH = 1024;
/** Parts one concatenated SMS can have (8-bit part count). */
const MAX_PARTS = 255;
const MO_TTL_S = 10 * 60;

/** Adds one MO part; returns every stored part (seq → value) once all `total` are there, else nil. */
const MO_PART_LUA = luaScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return redis.call('HGETALL', KEYS[1])
end
return false
`);

/**
 * Indexes accepted ids for receipts (`auto` id forms). Per part, ARGV holds the number of id keys
 * it has in KEYS, its ref and their ttl. The first id key (same representation) always points at the
 * ref; the others only when no other id claimed them first (NX), so a primary key is never
 * overwritten by an alias.
 */
const INDEX_IDS_LUA = luaScript(`
local k = 1
local a = 1
while a <= #ARGV do
  local ids = tonumber(ARGV[a])
  local ref = ARGV[a + 1]
  local ttl = tonumber(ARGV[a + 2])
  for i = 0, ids - 1 do
    if i == 0 then
      redis.call('SET', KEYS[k + i], ref, 'EX', ttl)
    else
      redis.call('SET', KEYS[k + i], ref, 'EX', ttl, 'NX')
    end
  end
  k = k + ids
  a = a + 3
end
return #KEYS
`);

export interface AcceptedParts {
  /** Concatenation reference of the parts already accepted when a legacy hash named it; else null (derive it). */
  concatRef: number | null;
  /** Part index → ref ('' when the SMSC gave no message_id). */
  parts: Map<number, string>;
}

export interface AcceptedPart {
  attemptId: number;
  part: number;
  ref: string;
  idKeys: string[] | null;
  idTtlSeconds: number;
}

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

export class SmppRedisStore {
  constructor(
    private readonly redis: Redis,
    /** `<redisPrefix>:smpp:<connection>` */
    private readonly base: string,
  ) {}

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
      pipeline.hmget(this.acceptedKey(attemptId), ...fields);
      pipeline.mget(legacyKeys); // written until 2026-11-25 (see the top of this file)
      pipeline.hgetall(`${this.base}:att:${attemptId}`); // written before that
    }
    const results = (await pipeline.exec()) ?? [];
    attempts.forEach(({ attemptId }, i) => {
      const parts = new Map<number, string>();
      for (let form = 0; form < 2; form++) {
        const [err, refs] = results[3 * i + form] ?? [null, null];
        if (err) throw err;
        ((refs ?? []) as Array<string | null>).forEach((ref, part) => {
          if (ref !== null && !parts.has(part)) parts.set(part, ref);
        });
      }
      const [errLegacy, legacy] = results[3 * i + 2] ?? [null, null];
      if (errLegacy) throw errLegacy;
      const hash = (legacy ?? {}) as Record<string, string>;
      for (const [field, ref] of Object.entries(hash)) {
        const m = /^p(\d+)$/.exec(field);
        if (m && !parts.has(Number(m[1]))) parts.set(Number(m[1]), ref);
      }
      if (parts.size === 0) return;
      const c = Number(hash.c);
      out.set(attemptId, { concatRef: hash.c !== undefined && Number.isInteger(c) ? c : null, parts });
    });
    return out;
  }

  private acceptedKey(attemptId: number): string {
    return `${this.base}:acc:${Math.floor(attemptId / ATTEMPTS_PER_HASH)}`;
  }

  /**
   * Records an accepted part, and (when `idKeys` is given) indexes the id's canonical keys for
   * receipts: the first key (same representation) always points at `ref`; the others only when
   * no other id claimed them first (`NX`), so a primary key is never overwritten by an alias.
   * Records made in the same tick (a window's worth of submit_sm_resp) share one pipeline.
   */
  recordAccepted(input: AcceptedPart): Promise<void> {
    return this.writes.add(input);
  }

  /** The refs indexed under each key (null where none); lookups of one tick share one MGET. */
  async lookupIds(keys: string[]): Promise<Array<string | null>> {
    if (keys.length === 0) return [];
    const lookups: Array<Promise<string | null>> = [];
    for (const k of keys) lookups.push(this.reads.add(k));
    return Promise.all(lookups);
  }

  private readonly writes = new TickBatcher<AcceptedPart, void>(async (inputs) => {
    // One HSET per hash of consecutive attempts, not a command per part: building and encoding
    // each command costs more in the client than the command costs in Redis.
    const byHash = new Map<string, string[]>();
    const idKeys: string[] = [];
    const idArgs: Array<string | number> = [];
    for (const input of inputs) {
      const key = this.acceptedKey(input.attemptId);
      pushTo(byHash, key, `${input.attemptId}:${input.part}`);
      pushTo(byHash, key, input.ref);
      if (input.idKeys && input.idKeys.length > 0 && input.ref !== '') {
        for (const k of input.idKeys) idKeys.push(`${this.base}:id:${k}`);
        idArgs.push(input.idKeys.length, input.ref, input.idTtlSeconds);
      }
    }
    const pipeline = this.redis.pipeline();
    for (const [key, fields] of byHash) {
      pipeline.hset(key, ...fields);
      pipeline.expire(key, ATTEMPT_TTL_S);
    }
    const [results] = await Promise.all([pipeline.exec(), idKeys.length > 0 ? runScript(this.redis, INDEX_IDS_LUA, idKeys, idArgs) : null]);
    for (const [err] of results ?? []) if (err) throw err;
    return new Array<void>(inputs.length);
  });

  private readonly reads = new TickBatcher<string, string | null>(async (keys) => {
    const names: string[] = [];
    for (const k of keys) {
      names.push(`${this.base}:id:${k}`);
    }
    const values = await this.redis.mget(...names);
    const found: Array<string | null> = [];
    for (let i = 0; i < keys.length; i++) {
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
