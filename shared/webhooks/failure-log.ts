/**
 * Failed webhook deliveries, said where an operator looks: a warning with the receiver's origin
 * (never its path or credentials), the answer (status or network error) and when the next attempt
 * comes, at most once per API key and origin per minute (a dead receiver fails for every batch;
 * the lines left out are counted in the next one).
 */
import type { Logger } from '../logger.js';
import { originOf } from './jobs.js';

export interface DeliveryFailure {
  keyId: number | null;
  url: string;
  /** The receiver's HTTP status, or null (no answer). */
  status: number | null;
  reason: string;
  attempts: number;
  /** Delay of the next attempt, or null: dead-lettered. */
  nextRetryMs: number | null;
}

export class WebhookFailureLog {
  private readonly last = new Map<string, { at: number; suppressed: number }>();

  constructor(private readonly logger: Logger, private readonly everyMs = 60_000, private readonly now = Date.now) {}

  failed(f: DeliveryFailure): void {
    const origin = originOf(f.url);
    const id = `${f.keyId ?? '-'} ${origin}`;
    const now = this.now();
    const seen = this.last.get(id);
    if (seen && now - seen.at < this.everyMs) {
      seen.suppressed += 1;
      return;
    }
    if (this.last.size >= 10_000) this.prune(now);
    this.last.set(id, { at: now, suppressed: 0 });
    this.logger.warn({
      key_id: f.keyId, origin, status: f.status, error: f.reason, attempts: f.attempts,
      ...(f.nextRetryMs === null
        ? { next_retry: null }
        : { next_retry_in_s: Math.round(f.nextRetryMs / 1000), next_retry_at: new Date(now + f.nextRetryMs).toISOString() }),
      ...(seen && seen.suppressed > 0 && { similar_failures_not_logged: seen.suppressed }),
    }, f.nextRetryMs === null ? 'webhook delivery failed; batch dead-lettered' : 'webhook delivery failed; retrying');
  }

  private prune(now: number): void {
    for (const [id, seen] of this.last) {
      if (now - seen.at >= this.everyMs) this.last.delete(id);
    }
  }
}
