/**
 * An account's suppression list (issue 27): numbers that opted out of a channel family, by keyword
 * or through the REST API. `accounts.suppressions` counts the account's rows; the statements here
 * keep it exact (an add that finds its row there already, or a delete that finds none, changes
 * nothing), so that dispatch can skip the lookup for accounts that have none.
 */
import { prepared, type Queryable, type Tx } from '../db/pool.js';
import { arrayRows, numberArray, textArray } from '../db/arrays.js';
import { familyOf, type Channel, type Family } from '../channels/index.js';
import { classifyKeyword, mayBeKeyword, type KeywordKind } from './keywords.js';

/** `result_info` of a promotional attempt refused because its number opted out. */
export const OPTED_OUT_INFO = '[304] Recipient opted out';

export type SuppressionSource = 'keyword' | 'api';

export interface Suppression {
  phone_number: string;
  family: Family;
  source: SuppressionSource;
  created_at: string;
}

interface Row {
  phone: string;
  family: Family;
  source: SuppressionSource;
  created_at: Date;
}

const present = (r: Row): Suppression => ({ phone_number: r.phone, family: r.family, source: r.source, created_at: r.created_at.toISOString() });

/** Put a number on the list for these families; returns its rows for them (added now or before). */
export async function addSuppressions(db: Queryable, accountId: number, families: readonly Family[], phone: string, source: SuppressionSource): Promise<Suppression[]> {
  const { rows } = await db.query<Row & { added: boolean }>(
    `WITH added AS (
       INSERT INTO suppressions (account_id, family, phone, source)
       SELECT $1, f, $3, $4 FROM unnest($2::text[]) AS f ORDER BY f
       ON CONFLICT (account_id, family, phone) DO NOTHING
       RETURNING family, phone, source, created_at),
     counted AS (
       UPDATE accounts SET suppressions = suppressions + (SELECT count(*) FROM added)
        WHERE id = $1 AND EXISTS (SELECT 1 FROM added))
     SELECT family, phone, source, created_at FROM added
     UNION ALL
     SELECT family, phone, source, created_at FROM suppressions
      WHERE account_id = $1 AND family = ANY($2::text[]) AND phone = $3 AND family NOT IN (SELECT family FROM added)
     ORDER BY family`,
    [accountId, textArray([...families]), phone, source],
  );
  return rows.map(present);
}

/** Take a number off the list for these families; returns the rows removed. */
export async function removeSuppressions(db: Queryable, accountId: number, families: readonly Family[], phone: string): Promise<Suppression[]> {
  const { rows } = await db.query<Row>(
    `WITH removed AS (
       DELETE FROM suppressions WHERE account_id = $1 AND family = ANY($2::text[]) AND phone = $3
       RETURNING family, phone, source, created_at),
     counted AS (
       UPDATE accounts SET suppressions = GREATEST(suppressions - (SELECT count(*) FROM removed), 0)
        WHERE id = $1 AND EXISTS (SELECT 1 FROM removed))
     SELECT family, phone, source, created_at FROM removed ORDER BY family`,
    [accountId, textArray([...families]), phone],
  );
  return rows.map(present);
}

export interface SuppressionQuery {
  family?: Family;
  phone?: string;
  /** Exclusive: the (family, phone) of the last row of the previous page. */
  after?: { family: string; phone: string };
  limit: number;
}

/** One page of the account's list in (family, phone) order: a range of its primary key. */
export async function listSuppressions(db: Queryable, accountId: number, q: SuppressionQuery): Promise<{ rows: Suppression[]; more: boolean }> {
  const params: unknown[] = [accountId];
  const where = ['account_id = $1'];
  if (q.family !== undefined) {
    params.push(q.family);
    where.push(`family = $${params.length}`);
  }
  if (q.phone !== undefined) {
    params.push(q.phone);
    where.push(`phone = $${params.length}`);
  }
  if (q.after) {
    params.push(q.after.family, q.after.phone);
    where.push(`(family, phone) > ($${params.length - 1}, $${params.length})`);
  }
  params.push(q.limit + 1);
  const { rows } = await db.query<Row>(
    `SELECT family, phone, source, created_at FROM suppressions WHERE ${where.join(' AND ')}
      ORDER BY family, phone LIMIT $${params.length}`,
    params,
  );
  return { rows: rows.slice(0, q.limit).map(present), more: rows.length > q.limit };
}

/**
 * An inbound message's keyword (D5 path, in its transaction): an opt-out puts the sender on the
 * owning account's list for the message's family, an opt-in takes it off. Texts that cannot be a
 * keyword of any list cost nothing; others read the account's lists. Senders that are not phone
 * numbers (a name) are never listed.
 */
export async function applyKeyword(tx: Tx, accountId: number, family: Family, sender: string, text: string): Promise<KeywordKind | null> {
  if (!/^\d{1,20}$/.test(sender) || !mayBeKeyword(text)) {
    return null;
  }
  const { rows } = await tx.query<{ opt_out_keywords: string[] | null; opt_in_keywords: string[] | null }>(
    'SELECT opt_out_keywords, opt_in_keywords FROM accounts WHERE id = $1', [accountId]);
  const kind = classifyKeyword(text, { optOut: rows[0]?.opt_out_keywords ?? null, optIn: rows[0]?.opt_in_keywords ?? null });
  if (kind === 'opt-out') {
    await addSuppressions(tx, accountId, [family], sender, 'keyword');
  } else if (kind === 'opt-in') {
    await removeSuppressions(tx, accountId, [family], sender);
  }
  return kind;
}

/** What dispatch needs of an attempt it plans to decide whether its number opted out. */
export interface OptOutCandidate {
  part: { msg: { account_id: number; opt_out_check: boolean } };
  recipient: { phone: string | null };
  channel: Channel;
  reject?: { info: string; fallback: boolean };
}

/**
 * Refuse the planned attempts whose number is on their account's list for their family: only those
 * of messages that ask for the check (promotional, the account has suppressions and enforces them;
 * `opt_out_check` is read with the message row), in one lookup for the whole dispatch job. The
 * refusal moves the flow on to its next step: the list is per family, another may still reach the
 * number (and is checked on its own).
 */
export async function refuseOptedOut(tx: Queryable, planned: readonly OptOutCandidate[]): Promise<void> {
  const accountIds: number[] = [], families: string[] = [], phones: string[] = [];
  for (const p of planned) {
    if (p.part.msg.opt_out_check && !p.reject && p.recipient.phone) {
      accountIds.push(p.part.msg.account_id);
      families.push(familyOf(p.channel));
      phones.push(p.recipient.phone);
    }
  }
  if (phones.length === 0) {
    return;
  }
  const { rows } = await tx.query<{ account_id: number; family: string; phone: string }>(prepared(
    `SELECT s.account_id, s.family, s.phone
       FROM ${arrayRows({ account_id: '$1::bigint[]', family: '$2::text[]', phone: '$3::text[]' })} AS u
       JOIN suppressions s ON s.account_id = u.account_id AND s.family = u.family AND s.phone = u.phone`,
    [numberArray(accountIds), textArray(families), textArray(phones)]),
  );
  if (rows.length === 0) {
    return;
  }
  const listed = new Set<string>();
  for (const r of rows) listed.add(`${r.account_id} ${r.family} ${r.phone}`);
  for (const p of planned) {
    if (p.part.msg.opt_out_check && !p.reject && p.recipient.phone && listed.has(`${p.part.msg.account_id} ${familyOf(p.channel)} ${p.recipient.phone}`)) {
      p.reject = { info: OPTED_OUT_INFO, fallback: true };
    }
  }
}
