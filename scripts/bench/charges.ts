/**
 * "No attempt is charged twice", read from the database once the run settled: shared by the
 * benchmark's e2e-smpp (every run, and with --copies / --kill-one) and the fault suite's checks.
 *
 * The account's balance must equal its initial credit minus the sum of `charged` of its attempts
 * that were not refunded (a charge taken twice, or a refund given twice, moves the balance away
 * from that sum), and no recipient may have more than one attempt (no retry step in either
 * harness's flows: a second attempt would be a second charge).
 */
import type pg from 'pg';

export interface ChargeFigures {
  /** The account's credit_czk now. */
  balance: number;
  initialCredit: number;
  /** Σ charged of attempts not refunded, and of refunded ones. */
  kept: number;
  refunded: number;
  chargedAttempts: number;
  refundedAttempts: number;
  attempts: number;
  /** initialCredit − kept, rounded to the column's 4 decimals. */
  expectedBalance: number;
  balanceOk: boolean;
  maxAttemptsPerRecipient: number;
  /** Recipients with more than one attempt. */
  recipientsWithSeveralAttempts: number;
  passed: boolean;
}

export async function chargeFigures(db: pg.Pool, accountId: number, initialCredit: number): Promise<ChargeFigures> {
  const { rows: [acct] } = await db.query<{ credit: string }>('SELECT credit_czk AS credit FROM accounts WHERE id = $1', [accountId]);
  const { rows: [sums] } = await db.query<{ kept: string | null; refunded: string | null; charged_n: string; refunded_n: string; attempts: string }>(
    `SELECT sum(charged) FILTER (WHERE NOT refunded) AS kept, sum(charged) FILTER (WHERE refunded) AS refunded,
            count(*) FILTER (WHERE charged > 0 AND NOT refunded) AS charged_n, count(*) FILTER (WHERE refunded) AS refunded_n,
            count(*) AS attempts
       FROM attempts WHERE payer_kind = 'account' AND payer_id = $1`, [accountId]);
  const { rows: [per] } = await db.query<{ max: string | null; several: string }>(
    `SELECT max(n) AS max, count(*) FILTER (WHERE n > 1) AS several
       FROM (SELECT count(*) AS n FROM attempts a JOIN recipients r ON r.id = a.recipient_id
              WHERE r.account_id = $1 GROUP BY a.recipient_id) x`, [accountId]);
  const balance = Number(acct!.credit);
  const kept = Number(sums!.kept ?? 0);
  const expectedBalance = Math.round((initialCredit - kept) * 10_000) / 10_000;
  const balanceOk = Math.abs(balance - expectedBalance) < 0.00005;
  const maxAttemptsPerRecipient = Number(per!.max ?? 0);
  return {
    balance,
    initialCredit,
    kept,
    refunded: Number(sums!.refunded ?? 0),
    chargedAttempts: Number(sums!.charged_n),
    refundedAttempts: Number(sums!.refunded_n),
    attempts: Number(sums!.attempts),
    expectedBalance,
    balanceOk,
    maxAttemptsPerRecipient,
    recipientsWithSeveralAttempts: Number(per!.several),
    passed: balanceOk && maxAttemptsPerRecipient <= 1,
  };
}
