/**
 * Who holds a webhook batch that no queue job stands for. The relay makes each batch's first
 * delivery attempt itself (direct.ts): until that attempt's outcome is recorded, the batch is
 * pending in Postgres and in that process's memory only. A process killed meanwhile left it to the
 * recovery sweep, which could not tell a dead holder from a live one that is still POSTing or
 * waiting for a slot, and so waited a minute without progress before queueing it (at least once,
 * D4: a live holder's batch queued again is POSTed twice).
 *
 * Now each relay process has a holder id, written on the batches it makes (`webhook_batches.holder`,
 * migration 026; it stays when a job takes the batch later, and then matters no more: a job
 * re-added under its id is a no-op), and keeps the key `<prefix>:webhooks:holder:<id>` alive in
 * Redis (renewed every `HOLDER_RENEW_MS`, expiring after `HOLDER_TTL_MS`; deleted at a graceful
 * stop, after the batches still waiting went to the queue). The sweep queues a pending batch at
 * once when its holder's key is gone (missing twice, `CONFIRM_GONE_MS` apart), and every batch
 * after a minute without progress as before. A killed relay's batches are delivered again about
 * 20-50 s after the kill at the defaults (the key's expiry, the next sweep and its second look),
 * not 60-90 s.
 *
 * Each key is a key of its own (no hash tag): on a cluster the sweep reads them one by one.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from '../redis.js';
import type { Logger } from '../logger.js';

/** How long a holder's key outlives its last renewal. */
export const HOLDER_TTL_MS = 15_000;
/** How often a live holder renews its key: three chances before it expires. */
export const HOLDER_RENEW_MS = 5_000;
/**
 * A batch younger than this is never queued for a missing key: its holder's key may not be
 * written yet (Redis was unreachable at the process's start) or may have gone with a Redis that
 * restarted empty, and comes back at the next renewal.
 */
export const DEAD_HOLDER_GRACE_MS = HOLDER_TTL_MS;
/**
 * A holder whose key is missing counts as gone only when it is still missing this much later
 * (longer than HOLDER_RENEW_MS): a live holder whose key went with Redis's data writes it again
 * meanwhile, and its batches are not POSTed a second time.
 */
export const CONFIRM_GONE_MS = HOLDER_RENEW_MS + 1_000;

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
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      this.redis.del(holderKey(this.prefix, this.id)).catch(() => undefined),
      new Promise<void>((resolve) => { waited = setTimeout(resolve, 1_000); }),
    ]);
    clearTimeout(waited);
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

/** A pending batch as the sweep reads it. */
export interface PendingBatch {
  id: number;
  url: string;
  /** The relay process that made it (and its first attempt); null: made without direct delivery. */
  holder: string | null;
  /** No progress for the sweep's grace (a minute at least): queued whoever holds it. */
  stale: boolean;
}

/**
 * The batches to queue again: every stale one, and those whose holder is gone. Pure. A batch
 * whose queue job is alive keeps that job (the same job id), so queueing is safe either way.
 */
export function batchesToQueue(batches: readonly PendingBatch[], live: ReadonlySet<string>): PendingBatch[] {
  return batches.filter((b) => b.stale || (b.holder !== null && !live.has(b.holder)));
}

/** The distinct holders of batches that are not stale (the ones whose liveness decides). */
export function holdersToCheck(batches: readonly PendingBatch[]): string[] {
  const ids = new Set<string>();
  for (const b of batches) {
    if (!b.stale && b.holder !== null) ids.add(b.holder);
  }
  return [...ids];
}
