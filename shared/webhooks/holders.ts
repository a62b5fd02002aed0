/**
 * Who holds a webhook batch that no queue job stands for. The relay makes each batch's first
 * delivery attempt itself (direct.ts): until that attempt's outcome is recorded, the batch is
 * pending in Postgres and in that process's memory only. A process killed meanwhile left it to the
 * recovery sweep, which could not tell a dead holder from a live one that is still POSTing or
 * waiting for a slot, and so waited a minute without progress before queueing it (at least once,
 * D4: a live holder's batch queued again is POSTed twice).
 *
 * Now each relay process has a holder id, written on the batches it makes (`webhook_batches.holder`,
 * migration 026; cleared when an attempt's outcome is recorded, after which a retry job stands
 * for the batch), and keeps the key `<prefix>:webhooks:holder:<id>` alive in Redis (renewed every
 * `HOLDER_RENEW_MS`, expiring after `HOLDER_TTL_MS`; deleted at a graceful stop, after the batches
 * still waiting went to the queue). The sweep queues a pending batch at once when its holder is
 * gone (`goneHolders`: the key missing twice, `CONFIRM_GONE_MS` apart), and every batch after a
 * minute without progress as before. A killed relay's batches are delivered again about 25-55 s
 * after the kill at the defaults (the key's expiry, the next sweep and its second look), not
 * 60-90 s.
 *
 * Each key is a key of its own (no hash tag): on a cluster the sweep reads them one by one.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { hostname } from 'node:os';
import type { Redis } from '../redis.js';
import type { Logger } from '../logger.js';

/** How long a holder's key outlives its last renewal. */
export const HOLDER_TTL_MS = 15_000;
/** How often a live holder renews its key: three chances before it expires. */
export const HOLDER_RENEW_MS = 5_000;
/**
 * A batch younger than this is never queued for a missing key: its holder's key may not be
 * written yet (Redis was unreachable at the process's start).
 */
export const DEAD_HOLDER_GRACE_MS = HOLDER_TTL_MS;
/**
 * A holder whose key is missing counts as gone only when it is still missing this much later:
 * two of its renewals, so that a live holder whose key went with Redis's data has written it
 * again meanwhile even if its client needed a reconnect first, and its batches are not POSTed a
 * second time.
 */
export const CONFIRM_GONE_MS = 2 * HOLDER_RENEW_MS;

export const holderKey = (prefix: string, id: string): string => `${prefix}:webhooks:holder:${id}`;

/** This process as the holder of the batches its relay delivers itself. */
export class BatchHolder {
  /** Unique per process start: a restarted process does not revive its predecessor's batches. */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private timer: NodeJS.Timeout | null = null;
  private failing = false;

  constructor(private readonly redis: Redis, private readonly prefix: string, private readonly logger: Logger) {}

  start(): void {
    if (this.timer) return;
    void this.renew();
    this.timer = setInterval(() => void this.renew(), HOLDER_RENEW_MS);
    this.timer.unref();
  }

  /** At a graceful stop, once the batches still waiting were queued: nothing is held any more. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    // Not waited for past a second (Redis may be down at shutdown): the key expires anyway.
    await Promise.race([this.redis.del(holderKey(this.prefix, this.id)).catch(() => undefined), sleep(1_000, undefined, { ref: false })]);
  }

  private async renew(): Promise<void> {
    try {
      await this.redis.set(holderKey(this.prefix, this.id), '1', 'PX', HOLDER_TTL_MS);
      if (this.failing) this.logger.info({ holder: this.id }, 'webhook batch holder key renewed again');
      this.failing = false;
    } catch (err) {
      // Once per outage. Its batches may be queued meanwhile by the sweep: POSTed twice at worst.
      if (!this.failing) this.logger.warn({ err: (err as Error).message, holder: this.id }, 'webhook batch holder key not renewed; the recovery sweep may queue this process\'s batches');
      this.failing = true;
    }
  }
}

/** The holders among `ids` whose keys exist. */
export async function liveHolders(redis: Redis, prefix: string, ids: readonly string[]): Promise<Set<string>> {
  const found = await Promise.all(ids.map((id) => redis.exists(holderKey(prefix, id))));
  const live = new Set<string>();
  ids.forEach((id, i) => {
    if (found[i]! > 0) live.add(id);
  });
  return live;
}

/**
 * Of `holders`, those gone: their key missing at a first look and still missing `confirmMs` later
 * (a live holder whose key went with Redis's data writes it again within HOLDER_RENEW_MS). When
 * the keys cannot be read, or the wait is aborted (the process stops), none counts as gone: the
 * sweep's one-minute rule still queues their batches. `read` answers which of its ids are alive.
 */
export async function goneHolders(
  holders: readonly string[],
  read: (ids: string[]) => Promise<Set<string>>,
  opts: { confirmMs: number; signal?: AbortSignal; onError?: (err: Error) => void },
): Promise<string[]> {
  if (holders.length === 0) return [];
  try {
    const live = await read([...holders]);
    const missing = holders.filter((h) => !live.has(h));
    if (missing.length === 0) return [];
    await sleep(opts.confirmMs, undefined, { signal: opts.signal });
    const back = await read(missing);
    return missing.filter((h) => !back.has(h));
  } catch (err) {
    if (!opts.signal?.aborted) opts.onError?.(err as Error);
    return [];
  }
}
