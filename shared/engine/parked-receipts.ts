/**
 * A receipt that arrives before its id is registered is parked in a `carrier_refs` row without an
 * attempt (status.ts, `resolveMoves`) and applied when the id is registered. One whose id is never
 * registered (a message another system sent over the same SMSC account or Viber connection, a
 * submit response lost with its process) belongs to nobody: after the receipt wait
 * (`RECEIPT_WAIT_HOURS`, the bound the sweep gives an attempt to hear from its carrier) the sweep
 * deletes it, logged at warn. They were kept forever.
 */
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { PeriodicCleanup } from '../db/periodic-cleanup.js';

export class ParkedReceiptExpiry extends PeriodicCleanup {
  constructor(db: Db, logger: Logger, receiptWaitHours: number, intervalMs = 60_000, batch = 5_000) {
    const seconds = Math.round(receiptWaitHours * 3600);
    // $1: rows per statement; migration 031's partial index finds them, oldest first.
    super(db, logger, 'receipts parked longer than RECEIPT_WAIT_HOURS for an id never registered were deleted', `DELETE FROM carrier_refs WHERE ctid = ANY(ARRAY(
      SELECT ctid FROM carrier_refs
       WHERE attempt_id IS NULL AND created_at < now() - make_interval(secs => ${seconds})
       ORDER BY created_at LIMIT $1))`,
    intervalMs, batch, 'warn');
  }
}
