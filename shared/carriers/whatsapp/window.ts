/**
 * WhatsApp's 24-hour customer-service window (channels.md 1.7): free text reaches a person only
 * within 24 hours of their latest message to the business number. The connector records when a
 * person last wrote (inbound webhooks) in `whatsapp_windows` (migration 016), one row per
 * (business phone number id, person), and the send path reads the rows of one hand-over in one
 * statement. Meta's own `131047` stays the backstop for what this view misses (a message that
 * reached Meta but not us, a clock at the boundary).
 */
import { prepared, type Queryable } from '../../db/pool.js';
import { arrayRows, textArray, timestampArray } from '../../db/arrays.js';

/** How long after a person's latest message free text may reach them. */
export const WINDOW_MS = 24 * 3600 * 1000;

/** The `result_info` of free text outside the window (Meta's code and title for it). */
export const OUTSIDE_WINDOW_INFO = '[131047] Re-engagement message';

/** One (business number, person) pair. `user` is the person's number, digits only. */
export interface WindowPair {
  phoneNumberId: string;
  user: string;
}

export const windowKey = (phoneNumberId: string, user: string): string => `${phoneNumberId}\u0000${user}`;

/** A person's number as both sides store it: digits only (Meta's `wa_id`, our E.164 without `+`). */
export function userKey(number: string): string {
  return number.replace(/\D/g, '');
}

/** Whether a window that opened at `lastInboundAt` is still open at `now`. Pure. */
export function windowOpen(lastInboundAt: number | undefined, now: number, windowMs = WINDOW_MS): boolean {
  return lastInboundAt !== undefined && now - lastInboundAt < windowMs;
}

const READ_SQL = `SELECT w.phone_number_id, w.user_number, w.last_inbound_at
    FROM ${arrayRows({ p: '$1::text[]', n: '$2::text[]' })} AS u
    JOIN whatsapp_windows w ON w.phone_number_id = u.p AND w.user_number = u.n`;

/** When each pair's person last wrote (unix ms), for the pairs that ever did; one statement. */
export async function lastInbound(db: Queryable, pairs: readonly WindowPair[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (pairs.length === 0) return out;
  const seen = new Set<string>();
  const p: string[] = [];
  const n: string[] = [];
  for (const pair of pairs) {
    const key = windowKey(pair.phoneNumberId, pair.user);
    if (seen.has(key)) continue;
    seen.add(key);
    p.push(pair.phoneNumberId);
    n.push(pair.user);
  }
  const { rows } = await db.query<{ phone_number_id: string; user_number: string; last_inbound_at: Date }>(
    prepared(READ_SQL, [textArray(p), textArray(n)]));
  for (const row of rows) out.set(windowKey(row.phone_number_id, row.user_number), row.last_inbound_at.getTime());
  return out;
}

const NOTE_SQL = `INSERT INTO whatsapp_windows AS w (phone_number_id, user_number, last_inbound_at)
    SELECT p, n, LEAST(t, now()) FROM ${arrayRows({ p: '$1::text[]', n: '$2::text[]', t: '$3::timestamptz[]' })} AS u
    ORDER BY p, n
    ON CONFLICT (phone_number_id, user_number) DO UPDATE SET last_inbound_at = GREATEST(w.last_inbound_at, EXCLUDED.last_inbound_at)`;

/**
 * Records that these people wrote at these times (a time in the future counts as now; a repeated
 * or older webhook never moves a window back). One statement, rows in key order.
 */
export async function noteInbound(db: Queryable, messages: ReadonlyArray<WindowPair & { at: number }>): Promise<void> {
  if (messages.length === 0) return;
  // One row per pair: a statement may not update the same row twice.
  const latest = new Map<string, WindowPair & { at: number }>();
  for (const m of messages) {
    const key = windowKey(m.phoneNumberId, m.user);
    const prior = latest.get(key);
    if (!prior || prior.at < m.at) latest.set(key, m);
  }
  const rows = [...latest.values()];
  await db.query(prepared(NOTE_SQL, [
    textArray(rows.map((r) => r.phoneNumberId)), textArray(rows.map((r) => r.user)), timestampArray(rows.map((r) => r.at)),
  ]));
}
