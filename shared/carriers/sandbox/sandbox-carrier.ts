/**
 * The built-in sandbox carrier (D10): answers every channel without any network. What it carried
 * is recorded so that integrators (and our tests) can read texts back; outcomes follow the table
 * in outcomes.ts and arrive asynchronously through the engine's common report path.
 *
 * Outcomes are durable: each carried message is stored `pending` until the last report of its
 * script was applied. Reports are timed in memory; a process that starts (and every sandbox, every
 * `recoverEveryMs`) replays the scripts of pending messages whose reports are overdue by more than
 * `graceMs`, so a restart delays outcomes but never drops them. Replaying is safe: a report the
 * engine applied before is no move.
 */
import { prepared, type Db } from '../../db/pool.js';
import { arrayRows, numberArray, textArray } from '../../db/arrays.js';
import type { Logger } from '../../logger.js';
import { isChannel, type AttemptState, type Channel } from '../../channels/index.js';
import type { Carrier, CarrierSink, OutboundAttempt } from '../types.js';
import { sandboxScript } from './outcomes.js';
import { STATE_RANK } from '../../engine/transitions.js';

export const SANDBOX_CARRIER = 'sandbox';

export interface SandboxOptions {
  /** Delay of the `04` SMS outcome (D10: 5 s). */
  slowDeliveryMs: number;
  /** How overdue a pending message's report is before a replay applies it; default 2000 ms. */
  graceMs?: number;
  /** How often pending messages are looked for; default 30 s (0: only at start). */
  recoverEveryMs?: number;
}

export class SandboxCarrier implements Carrier {
  readonly name = SANDBOX_CARRIER;
  private readonly timers = new Set<NodeJS.Timeout>();
  private done: number[] = [];
  private flushing: Promise<void> | null = null;
  private recoverTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly sink: CarrierSink,
    private readonly logger: Logger,
    private readonly opts: SandboxOptions,
  ) {}

  /** Replays what a process that stopped left pending, then keeps looking every `recoverEveryMs`. */
  start(): void {
    const tick = (graceMs: number) => {
      this.recover(graceMs).catch((err: unknown) => this.logger.warn({ err: (err as Error).message }, 'sandbox recovery failed'));
    };
    // At start every pending script is played from where it is (another process's live timers may
    // fire too: a report applied twice is no move); later only what is overdue.
    tick(0);
    const every = this.opts.recoverEveryMs ?? 30_000;
    if (every > 0) {
      this.recoverTimer = setInterval(() => tick(this.opts.graceMs ?? 2000), every);
      this.recoverTimer.unref();
    }
  }

  async send(attempts: OutboundAttempt[]): Promise<void> {
    if (attempts.length === 0) {
      return;
    }
    // The read-back record, pending until its outcome is applied; ON CONFLICT makes a re-hand after
    // a crash harmless. A named statement with our array literals.
    await this.db.query(prepared(
      `INSERT INTO sandbox_messages (account_id, recipient_id, attempt_id, gateway, sender, phone_number, body, parts, encoding, pending)
       SELECT r.account_id, u.public_id, u.attempt_id, u.gateway, u.sender, u.phone, u.body, u.parts, u.encoding, true
         FROM ${arrayRows({
           attempt_id: '$1::bigint[]', public_id: '$2::text[]', gateway: '$3::text[]', sender: '$4::text[]', phone: '$5::text[]',
           body: '$6::text[]', parts: '$7::int[]', encoding: '$8::text[]',
         })} AS u
         JOIN attempts a ON a.id = u.attempt_id
         JOIN recipients r ON r.id = a.recipient_id
        WHERE a.id = ANY($1)
       ON CONFLICT (attempt_id) DO NOTHING`,
      [numberArray(attempts.map((a) => a.attemptId)), textArray(attempts.map((a) => a.recipientPublicId)),
        textArray(attempts.map((a) => a.channel)), textArray(attempts.map((a) => a.sender)), textArray(attempts.map((a) => a.to)),
        textArray(attempts.map((a) => a.text)), numberArray(attempts.map((a) => (a.channel === 'sms' ? a.parts.length : 1))),
        textArray(attempts.map((a) => (a.channel === 'sms' ? a.encoding : null)))]),
    );
    for (const attempt of attempts) {
      this.play(attempt.attemptId, attempt.channel, attempt.to, 0, 'sending');
    }
  }

  /**
   * Times the reports of an attempt's script that are still ahead of `current`, `elapsedMs` after
   * its hand-over; the last one marks the message done.
   */
  private play(attemptId: number, channel: Channel, phone: string, elapsedMs: number, current: AttemptState): void {
    const steps = sandboxScript(channel, phone, this.opts.slowDeliveryMs).filter((s) => STATE_RANK[s.state] > STATE_RANK[current]);
    if (steps.length === 0) {
      this.markDone(attemptId);
      return;
    }
    steps.forEach((step, i) => {
      const last = i === steps.length - 1;
      this.later(Math.max(0, step.afterMs - elapsedMs), async () => {
        await this.sink.report([{ attemptId, state: step.state, resultInfo: step.resultInfo, at: Date.now() }]);
        if (last) this.markDone(attemptId);
      });
    });
  }

  /**
   * Pending messages whose next report is overdue by more than `graceMs` (a process stopped before
   * applying it): played again from where they are. `graceMs` 0 plays every pending one.
   */
  async recover(graceMs: number, now = Date.now()): Promise<number> {
    if (this.closed) return 0;
    const { rows } = await this.db.query<{ attempt_id: number; gateway: string; phone_number: string; created_ms: number; state: AttemptState }>(
      `SELECT s.attempt_id, s.gateway, s.phone_number, (extract(epoch FROM s.created_at) * 1000)::float8 AS created_ms, a.state
         FROM sandbox_messages s JOIN attempts a ON a.id = s.attempt_id
        WHERE s.pending AND s.created_at < now() - make_interval(secs => $1::float / 1000)
        ORDER BY s.created_at LIMIT 5000`,
      [graceMs],
    );
    let replayed = 0;
    for (const row of rows) {
      if (!isChannel(row.gateway)) continue;
      const elapsed = now - row.created_ms;
      const next = sandboxScript(row.gateway, row.phone_number, this.opts.slowDeliveryMs).find((s) => STATE_RANK[s.state] > STATE_RANK[row.state]);
      // Only what is overdue: a report still ahead of its time belongs to the process that carried it.
      if (graceMs > 0 && next && next.afterMs + graceMs > elapsed) continue;
      this.play(row.attempt_id, row.gateway, row.phone_number, elapsed, row.state);
      replayed++;
    }
    if (replayed > 0) this.logger.info({ replayed }, 'sandbox outcomes replayed after a stop');
    return replayed;
  }

  private markDone(attemptId: number): void {
    this.done.push(attemptId);
    if (!this.flushing) {
      this.flushing = new Promise<void>((resolve) => setTimeout(resolve, 50)).then(() => this.flushDone()).finally(() => {
        this.flushing = null;
      });
    }
  }

  private async flushDone(): Promise<void> {
    const ids = this.done;
    this.done = [];
    if (ids.length === 0) return;
    try {
      await this.db.query(prepared('UPDATE sandbox_messages SET pending = false WHERE attempt_id = ANY($1) AND pending', [numberArray(ids)]));
    } catch (err) {
      // Still pending: a later replay finds their reports applied already (no moves) and marks them.
      this.logger.warn({ err: (err as Error).message, count: ids.length }, 'sandbox outcomes not marked done');
    }
  }

  private later(ms: number, fn: () => Promise<void>): void {
    if (this.closed) {
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn().catch((err: unknown) => this.logger.error({ err: (err as Error).message }, 'sandbox report failed'));
    }, ms);
    this.timers.add(timer);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.recoverTimer) clearInterval(this.recoverTimer);
    for (const timer of this.timers) {
      clearTimeout(timer);
    }
    this.timers.clear();
    await this.flushing;
    await this.flushDone();
  }
}
