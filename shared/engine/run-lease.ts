/**
 * A dispatch run's hold on its BullMQ job, as its own process knows it: what lets a carrier tell,
 * before each write, whether the run may still hand its attempts over (`OutboundAttempt.hold`).
 *
 * The job's lock lasts `lockMs` from each renewal's execution in Redis, which comes after this
 * process sent the renewal. The hold counts from that sending (not from the answer, which a pause
 * may hold back for any time), for `VALID_SHARE` of the lock: once it has passed, another process
 * may have the job (the lock lapsed and a stalled-job check gave it away), so the run stops. The
 * first hold counts from the run's `processedOn` (this process's clock, read before it asked
 * Redis for the job). BullMQ renews a running job's lock every `lockMs` / 4 to `lockMs` / 2, so a
 * live run's hold lapses only when a renewal's answer, plus any stall of its event loop, takes
 * longer than the rest (`lockMs` / 4). A renewal found refused (`lost`) ends the hold at once.
 *
 * This is what covers a process paused (SIGSTOP, a VM pause) or cut off from Redis past its lock:
 * a hold read from the clock, not from a timer or an event, is over the moment the process runs
 * again, before it handles the answers waiting on its sockets. Pure apart from the clock, which
 * callers may pass.
 */
export const VALID_SHARE = 0.75;

export class RunLease {
  private validUntil: number;
  private lostLock = false;

  constructor(private readonly lockMs: number, now = Date.now()) {
    this.validUntil = now + lockMs * VALID_SHARE;
  }

  /** The job's lock was renewed by a request sent at `sentAt`; an earlier hold is never shortened. */
  renewed(sentAt: number): void {
    if (!this.lostLock) this.validUntil = Math.max(this.validUntil, sentAt + this.lockMs * VALID_SHARE);
  }

  /** A renewal found the lock gone or another's. */
  lost(): void {
    this.lostLock = true;
  }

  /** Whether the run may still write: the lock is known to be its own. */
  held(now = Date.now()): boolean {
    return !this.lostLock && now < this.validUntil;
  }
}
