/**
 * The built-in sandbox carrier (D10): answers every channel without any network. What it carried
 * is recorded so that integrators (and our tests) can read texts back; outcomes follow the table
 * in outcomes.ts and arrive asynchronously through the engine's common report path.
 */
import { prepared, type Db } from '../../db/pool.js';
import { numberArray, textArray } from '../../db/arrays.js';
import type { Logger } from '../../logger.js';
import type { Carrier, CarrierSink, OutboundAttempt } from '../types.js';
import { sandboxScript } from './outcomes.js';

export const SANDBOX_CARRIER = 'sandbox';

export class SandboxCarrier implements Carrier {
  readonly name = SANDBOX_CARRIER;
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly sink: CarrierSink,
    private readonly logger: Logger,
    private readonly slowDeliveryMs: number,
  ) {}

  async send(attempts: OutboundAttempt[]): Promise<void> {
    if (attempts.length === 0) {
      return;
    }
    // The read-back record; ON CONFLICT makes a re-hand after a crash harmless.
    // A named statement (planned once per connection, not per call) with our array literals.
    await this.db.query(prepared(
      `INSERT INTO sandbox_messages (account_id, recipient_id, attempt_id, gateway, sender, phone_number, body, parts, encoding)
       SELECT r.account_id, u.public_id, u.attempt_id, u.gateway, u.sender, u.phone, u.body, u.parts, u.encoding
         FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[])
           AS u(attempt_id, public_id, gateway, sender, phone, body, parts, encoding)
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
      for (const step of sandboxScript(attempt.channel, attempt.to, this.slowDeliveryMs)) {
        this.later(step.afterMs, () =>
          this.sink.report([{ attemptId: attempt.attemptId, state: step.state, resultInfo: step.resultInfo, at: Date.now() }]));
      }
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
    for (const timer of this.timers) {
      clearTimeout(timer);
    }
    this.timers.clear();
  }
}
