/**
 * What an SMPP connection keeps in Redis, shared by every process bound over it. All keys start
 * with `<redisPrefix>:smpp:<connection>:` and expire on their own:
 *
 * - `att:<attemptId>:<part>` (string, 6 h): the ref of a part the SMSC accepted ('' when it gave
 *   no message_id). A re-hand of the same attempt (dispatch job retried after a crash or a failed
 *   send) skips those parts, so the SMSC never gets an accepted part twice; the concatenation
 *   reference is derived from the attempt id, so the resumed parts still join on the handset. One
 *   plain SET per part: a hash per attempt cost two commands (HSET, EXPIRE). Versions before
 *   2026-11-25 wrote a hash `att:<attemptId>` (`p<index>` → ref, `c` → reference); a re-hand still
 *   reads it until those have expired.
 * - `id:<key>` (string, step ttl + 1 day): receipt-id index, written only when a connection's id
 *   forms are `auto`. Each canonical key of a submit_sm_resp id (see `normalizeMessageId`) points
 *   at the ref registered with the engine, so a receipt naming the same message in another form
 *   (decimal for a hex id, other case, leading zeros) finds it.
 * - `mo:<src>:<dst>:<bits>:<ref>:<total>` (hash, 10 min): parts of a concatenated inbound SMS, so
 *   parts that arrive over different binds (processes) are still joined.
 */
import type { Redis } from 'ioredis';
import { luaScript, runScript } from './token-bucket.js';

const ATTEMPT_TTL_S = 6 * 3600;
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
 * Records accepted parts. ARGV[1]: ttl of the part keys; then per part: the number of id keys
 * that follow its part key in KEYS, ref, id ttl. The first id key (same representation) always
 * points at the ref; the others only when no other id claimed them first (NX), so a primary key
 * is never overwritten by an alias.
 */
const RECORD_ACCEPTED_LUA = luaScript(`
local ttl = tonumber(ARGV[1])
local k = 1
local a = 2
while a <= #ARGV do
  local ids = tonumber(ARGV[a])
  local ref = ARGV[a + 1]
  local idTtl = tonumber(ARGV[a + 2])
  redis.call('SET', KEYS[k], ref, 'EX', ttl)
  for i = 1, ids do
    if i == 1 then
      redis.call('SET', KEYS[k + i], ref, 'EX', idTtl)
    else
      redis.call('SET', KEYS[k + i], ref, 'EX', idTtl, 'NX')
    end
  end
  k = k + 1 + ids
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
  private pending: Array<{ input: I; resolve(value: O): void; reject(err: unknown): void }> = [];

  constructor(private readonly run: (inputs: I[]) => Promise<O[]>) {}

  add(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.pending.push({ input, resolve, reject }) === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    try {
      const results = await this.run(batch.map((b) => b.input));
      batch.forEach((b, i) => b.resolve(results[i]!));
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
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
      // At least one key (MGET takes one or more) and at most the 255 parts a message can have.
      const keys = Math.min(MAX_PARTS, Math.max(1, partCount));
      pipeline.mget(Array.from({ length: keys }, (_, part) => `${this.base}:att:${attemptId}:${part}`));
      pipeline.hgetall(`${this.base}:att:${attemptId}`); // legacy hash (see the top of this file)
    }
    const results = (await pipeline.exec()) ?? [];
    attempts.forEach(({ attemptId }, i) => {
      const [errParts, refs] = results[2 * i] ?? [null, null];
      const [errLegacy, legacy] = results[2 * i + 1] ?? [null, null];
      if (errParts) throw errParts;
      if (errLegacy) throw errLegacy;
      const parts = new Map<number, string>();
      ((refs ?? []) as Array<string | null>).forEach((ref, part) => {
        if (ref !== null) parts.set(part, ref);
      });
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
    return Promise.all(keys.map((k) => this.reads.add(k)));
  }

  private readonly writes = new TickBatcher<AcceptedPart, void>(async (inputs) => {
    // One script call per tick's worth of parts: three or four commands per part cost more in the
    // client (building and encoding each command) than in Redis.
    const keys: string[] = [];
    const args: Array<string | number> = [ATTEMPT_TTL_S];
    for (const input of inputs) {
      const idKeys = input.idKeys && input.ref !== '' ? input.idKeys : [];
      keys.push(`${this.base}:att:${input.attemptId}:${input.part}`, ...idKeys.map((k) => `${this.base}:id:${k}`));
      args.push(idKeys.length, input.ref, input.idTtlSeconds);
    }
    await runScript(this.redis, RECORD_ACCEPTED_LUA, keys, args);
    return inputs.map(() => undefined);
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
