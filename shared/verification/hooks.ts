/**
 * Engine hooks of the verification API (D8). A verification message is stored with its code
 * masked; at dispatch the real text is built from the encrypted copy, the recipient row keeps the
 * masked text, the copy is erased once the SMS reached its carrier, and a delivery receipt moves
 * the session from `pending` to `code_sent`.
 */
import { prepared, type Db, type Tx } from '../db/pool.js';
import { numberArray } from '../db/arrays.js';
import type { Config } from '../config.js';
import type { EngineHooks } from '../engine/engine.js';
import { createLogger, type Logger } from '../logger.js';
import { PeriodicCleanup } from '../db/periodic-cleanup.js';
import { verificationKeys } from './secrets.js';
import { SecretBox } from '../secrets/sealed.js';
import { CODE_MASK, decryptCode, fillTemplate, maskedTemplate } from './codes.js';

export const VERIFY_SOURCE = 'verify';

/**
 * Real text → masked text, filled by `resolveTexts` and read (once) by `maskText` within the same
 * dispatch transaction. Bounded: entries that were never read (a rolled-back dispatch) are dropped
 * wholesale when it grows.
 */
class MaskMemo {
  private readonly map = new Map<string, string>();

  remember(real: string, masked: string): void {
    if (this.map.size > 10_000) {
      this.map.clear();
    }
    this.map.set(real, masked);
  }

  take(real: string): string | undefined {
    const masked = this.map.get(real);
    this.map.delete(real);
    return masked;
  }
}

/** Last resort when the text was not resolved here: hide every run of six digits. */
export function maskDigits(text: string): string {
  return text.replace(/\d{6}/g, CODE_MASK);
}

export function verificationHooks(db: Db, config: Config): EngineHooks {
  const memo = new MaskMemo();
  const logger = createLogger(config.logLevel, 'verification');
  const box = new SecretBox(config.credentialsKey);

  return {
    async resolveTexts(tx: Tx, source: string, recipientIds: number[]): Promise<Map<number, string> | null> {
      if (source !== VERIFY_SOURCE || recipientIds.length === 0) {
        return null;
      }
      const keys = await verificationKeys(db, box);
      // Named statements here and below: each verification start runs them once, and unnamed
      // ones were planned on every run (pg_stat_statements: planning was 0.1-0.2 ms each, more
      // than running them).
      const { rows } = await tx.query<{ recipient_id: number; token: string; code_enc: string; sms_template: string | null }>(prepared(
        `SELECT v.recipient_id, v.token, v.code_enc, COALESCE(v.sms_template, a.verification_template) AS sms_template
           FROM validations v JOIN accounts a ON a.id = v.account_id
          WHERE v.recipient_id = ANY($1) AND v.code_enc IS NOT NULL`,
        [numberArray(recipientIds)]),
      );
      const texts = new Map<number, string>();
      for (const row of rows) {
        const code = decryptCode(keys.codeEnc, row.token, row.code_enc);
        if (code === null) {
          logger.error({ recipientId: row.recipient_id }, 'verification code copy could not be decrypted');
          continue;
        }
        const template = row.sms_template ?? '{code}';
        const text = fillTemplate(template, code);
        memo.remember(text, maskedTemplate(template));
        texts.set(row.recipient_id, text);
      }
      return texts;
    },

    maskText(source: string, text: string): string {
      if (source !== VERIFY_SOURCE) {
        return text;
      }
      return memo.take(text) ?? maskDigits(text);
    },

    async afterHanded(source, attempts): Promise<void> {
      if (source !== VERIFY_SOURCE || attempts.length === 0) {
        return;
      }
      // D8: the encrypted copy lives only until the SMS is handed to the carrier. A failure here
      // must not fail the dispatch; the copy is also erased on delivery and on any final status.
      try {
        await db.query(prepared(
          `UPDATE validations v SET code_enc = NULL
             FROM attempts a
            WHERE a.id = ANY($1) AND v.recipient_id = a.recipient_id AND v.code_enc IS NOT NULL`,
          [numberArray(attempts.map((a) => a.attemptId))]),
        );
      } catch (err) {
        logger.error({ err: (err as Error).message }, 'could not erase handed verification code copies');
      }
    },

    async onDelivered(tx: Tx, recipientIds: number[], sources: string[]): Promise<void> {
      const ids: number[] = [];
      for (let i = 0; i < recipientIds.length; i++) {
        if (sources[i] === VERIFY_SOURCE) ids.push(recipientIds[i]!);
      }
      if (ids.length === 0) {
        return;
      }
      await tx.query(prepared(
        `UPDATE validations
            SET status = CASE WHEN status = 'pending' AND expires_at > now() THEN 'code_sent' ELSE status END,
                code_enc = NULL
          WHERE recipient_id = ANY($1)`,
        [numberArray(ids)]),
      );
    },
  };
}

/**
 * How long after its session expired an encrypted code copy that was never erased is kept: one
 * whose SMS never reached a carrier (refused at dispatch, e.g. `[307]`; the test number, which is
 * never sent; a crash). Long enough that no dispatch still reads it: without its copy a late
 * dispatch would send the masked text.
 */
export const CODE_COPY_GRACE_HOURS = 24;

/** Erases such copies (D8: a code that can no longer be verified keeps no copy), in the sweep's process. */
export class CodeCopyExpiry extends PeriodicCleanup {
  constructor(db: Db, logger: Logger, intervalMs = 60_000, batch = 5_000) {
    // $1: rows per statement; the partial index validations_code_copies (migration 028) finds them.
    super(db, logger, 'erasing expired verification code copies', `UPDATE validations SET code_enc = NULL WHERE id = ANY(ARRAY(
      SELECT id FROM validations
       WHERE code_enc IS NOT NULL AND expires_at < now() - make_interval(hours => ${CODE_COPY_GRACE_HOURS})
       ORDER BY expires_at LIMIT $1))`,
    intervalMs, batch);
  }
}
