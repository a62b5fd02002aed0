/**
 * What the fault suite checks once the system settled, read from the suite's own Postgres, the
 * webhook receiver, the SMSC simulator and the client's answers. Each check is a row of the table
 * the suite prints: PASS / FAIL, or INFO for figures that are allowed but reported (duplicate
 * submits and webhook deliveries).
 */
import type pg from 'pg';
import { expectedFinal, expectedResults } from './plan.js';
import type { Campaign } from './campaign.js';
import type { EventReceiver } from './receiver.js';
import { chargeFigures } from '../bench/charges.js';

export interface CheckRow {
  check: string;
  verdict: 'PASS' | 'FAIL' | 'INFO';
  detail: string;
  examples?: string[];
}

/** Per destination at the simulator: [submits, accepted, firstAt, lastAt, receipts sent, last receipt's stat]. */
export type SubmitsByDestination = Map<string, [number, number, number, number, number, string]>;

export interface CheckInput {
  db: pg.Pool;
  accountId: number;
  initialCredit: number;
  campaign: Campaign;
  receiver: EventReceiver;
  submits: SubmitsByDestination;
  /** Names a time (epoch ms) by the fault in progress or last before it. */
  faultAt: (t: number) => string;
}

interface RecipientRow {
  public_id: string;
  phone: string | null;
  state: string;
  result_info: string | null;
  attempt_id: string | null;
}

const plural = (n: number, what: string) => `${n.toLocaleString('en-US')} ${what}${n === 1 ? '' : 's'}`;
const tally = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(', ');
const bump = (m: Map<string, number>, k: string, by = 1) => m.set(k, (m.get(k) ?? 0) + by);
/** The states a receipt moves an SMS attempt to. */
const RECEIPT_STATE_VALUES: ReadonlySet<string> = new Set(['delivered', 'undelivered', 'rejected']);

/** Recipients not yet at their expected final result, by `expected→actual` (the settle loop's measure too). */
export async function unsettledRecipients(db: pg.Pool, accountId: number): Promise<{ total: number; wrong: number; byKind: Map<string, number> }> {
  const { rows } = await db.query<{ ending: string; state: string; n: string }>(
    `SELECT right(coalesce(phone, ''), 2) AS ending, state, count(*) AS n FROM recipient_states WHERE account_id = $1 GROUP BY 1, 2`, [accountId]);
  let total = 0;
  let wrong = 0;
  const byKind = new Map<string, number>();
  for (const r of rows) {
    const n = Number(r.n);
    total += n;
    const want = expectedFinal(`00${r.ending}`);
    if (r.state !== want) {
      wrong += n;
      bump(byKind, `${want}→${r.state}`, n);
    }
  }
  return { total, wrong, byKind };
}

export async function runChecks(input: CheckInput): Promise<CheckRow[]> {
  const { db, accountId, campaign, receiver } = input;
  const rows: CheckRow[] = [];

  // 1. Every accepted recipient reaches its expected final result (in Postgres).
  const { rows: recipients } = await db.query<RecipientRow>(
    'SELECT public_id, phone, state, result_info, attempt_id FROM recipient_states WHERE account_id = $1', [accountId]);
  const byId = new Map(recipients.map((r) => [r.public_id, r]));
  const wrong = new Map<string, number>();
  const wrongExamples: RecipientRow[] = [];
  for (const r of recipients) {
    const want = expectedFinal(r.phone ?? '');
    if (r.state !== want) {
      const kind = `${want}→${r.state}`;
      bump(wrong, kind);
      // Two examples of each kind, at most eight in all.
      if (wrong.get(kind)! <= 2 && wrongExamples.length < 8) {
        wrongExamples.push(r);
      }
    }
  }
  const lost = [...campaign.accepted.keys()].filter((id) => !byId.has(id));
  const unacknowledged = recipients.filter((r) => !campaign.accepted.has(r.public_id)).length;
  const examples: string[] = [];
  for (const r of wrongExamples) {
    examples.push(await describeRecipient(db, r, input));
  }
  examples.push(...lost.slice(0, 3).map((id) => `${id}: acknowledged by a 200 but not stored`));
  const wrongTotal = [...wrong.values()].reduce((a, b) => a + b, 0);
  rows.push({
    check: 'every accepted recipient reaches its expected final result',
    verdict: wrongTotal === 0 && lost.length === 0 ? 'PASS' : 'FAIL',
    detail: `${plural(recipients.length, 'recipient')} stored (${campaign.acknowledgedRecipients.toLocaleString('en-US')} acknowledged by a 200, ` +
      `${unacknowledged} stored without one); ${wrongTotal === 0 ? 'all at their expected final result' : `not at it: ${tally(wrong)}`}` +
      `${lost.length ? `; ${lost.length} acknowledged but not stored` : ''}`,
    ...(examples.length && { examples }),
  });

  // 2. No recipient gets two different final results in the events its receiver saw.
  let conflicts = 0;
  const conflictExamples: string[] = [];
  let webhookFinalDiffers = 0;
  const differsExamples: string[] = [];
  for (const [id, finals] of receiver.finals) {
    if (finals.size > 1) {
      conflicts++;
      if (conflictExamples.length < 5) {
        conflictExamples.push(`${id}: ${[...finals].join(' and ')} (results in arrival order: ${receiver.results.get(id)?.join(',')})`);
      }
    }
  }
  for (const r of recipients) {
    const finals = receiver.finals.get(r.public_id);
    const got = finals ? [...finals].join('+') : 'sent';
    if (got !== r.state && r.state !== 'queued' && r.state !== 'sending') {
      webhookFinalDiffers++;
      if (differsExamples.length < 3) {
        differsExamples.push(`${r.public_id} (${r.phone}): webhooks say ${got}, Postgres says ${r.state}`);
      }
    }
  }
  rows.push({
    check: 'no recipient gets two different final results (webhooks)',
    verdict: conflicts === 0 ? 'PASS' : 'FAIL',
    detail: `${plural(receiver.finals.size, 'recipient')} with a final result in webhooks; ${conflicts} with two different ones` +
      `${webhookFinalDiffers ? `; ${webhookFinalDiffers} whose webhook final differs from the stored one` : ''}`,
    ...(conflictExamples.length + differsExamples.length > 0 && { examples: [...conflictExamples, ...differsExamples] }),
  });

  // 3. No attempt is charged twice: balance = initial credit − Σ charged of charged, not refunded attempts.
  const charges = await chargeFigures(db, accountId, input.initialCredit);
  rows.push({
    check: 'no attempt is charged twice (balance = credit − Σ charged)',
    verdict: charges.passed ? 'PASS' : 'FAIL',
    detail: `balance ${charges.balance.toFixed(4)} CZK; initial ${input.initialCredit.toFixed(4)} − ${charges.kept.toFixed(4)} charged on ` +
      `${charges.chargedAttempts.toLocaleString('en-US')} attempts = ${charges.expectedBalance.toFixed(4)}` +
      `${charges.balanceOk ? '' : ` (difference ${(charges.expectedBalance - charges.balance).toFixed(4)})`}; ${charges.refundedAttempts} attempts refunded ` +
      `(${charges.refunded.toFixed(4)}); at most ${charges.maxAttemptsPerRecipient} attempt(s) per recipient`,
  });

  // 4. No stored event is left undelivered: every event with a callback URL is in a delivered batch,
  // and the receiver got each of them.
  const { rows: events } = await db.query<{ id: string; message_id: string; gateway: string; result: string; batch_status: string | null }>(
    `WITH b AS (SELECT DISTINCT ON (e) e AS event_id, status FROM webhook_batches, unnest(event_ids) AS e
                 ORDER BY e, (status = 'delivered') DESC)
     SELECT ev.id, ev.body::json->>'message_id' AS message_id, ev.body::json->>'gateway' AS gateway, ev.body::json->>'result' AS result,
            b.status AS batch_status
       FROM events ev LEFT JOIN b ON b.event_id = ev.id
      WHERE ev.account_id = $1 AND ev.callback_url IS NOT NULL`, [accountId]);
  const notDelivered = new Map<string, number>();
  let notReceived = 0;
  const stored = new Map<string, number>();
  const undeliveredExamples: string[] = [];
  for (const e of events) {
    const key = `${e.message_id}\t${e.gateway}\t${e.result}`;
    bump(stored, key);
    if (e.batch_status !== 'delivered') {
      bump(notDelivered, e.batch_status ?? 'in no batch');
      if (undeliveredExamples.length < 3) {
        undeliveredExamples.push(`event ${e.id} (${e.message_id} ${e.result}): ${e.batch_status ?? 'in no batch'}`);
      }
    } else if (!receiver.triples.has(key)) {
      notReceived++;
      if (undeliveredExamples.length < 6) {
        undeliveredExamples.push(`event ${e.id} (${e.message_id} ${e.result}): batch delivered but the receiver never got it`);
      }
    }
  }
  const storedTwice = [...stored.values()].filter((n) => n > 1).length;
  // Events every stored recipient should have (by its number), compared with what was stored.
  let missingStored = 0;
  for (const r of recipients) {
    for (const result of expectedResults(r.phone ?? '')) {
      if (!stored.has(`${r.public_id}\tsms\t${result}`)) {
        missingStored++;
      }
    }
  }
  const undeliveredTotal = [...notDelivered.values()].reduce((a, b) => a + b, 0);
  rows.push({
    check: 'no stored event is left undelivered',
    verdict: undeliveredTotal === 0 && notReceived === 0 ? 'PASS' : 'FAIL',
    detail: `${plural(events.length, 'event')} with a callback URL; ${undeliveredTotal === 0 ? 'all in delivered batches' : `not delivered: ${tally(notDelivered)}`}; ` +
      `${notReceived} in delivered batches but not received; ${receiver.distinct.toLocaleString('en-US')} distinct events received` +
      `${storedTwice ? `; ${storedTwice} events stored twice (same message_id+gateway+result)` : ''}` +
      `${missingStored ? `; ${missingStored} expected events never stored (their recipients did not reach the state)` : ''}`,
    ...(undeliveredExamples.length && { examples: undeliveredExamples }),
  });

  // 5. Every receipt the SMSC sent was applied to its own message, and no message got a receipt
  // that was not its own (a recipient whose number never gets a receipt cannot end delivered).
  const RECEIPT_STATE: Record<string, string> = { DELIVRD: 'delivered', UNDELIV: 'undelivered', REJECTD: 'rejected' };
  const receiptMisses = new Map<string, number>();
  const missExamples: string[] = [];
  for (const r of recipients) {
    const sim = r.phone ? input.submits.get(r.phone) : undefined;
    const own = sim && sim[4] > 0 ? RECEIPT_STATE[sim[5]] ?? null : null;
    let miss: string | null = null;
    if (own && r.state === 'sent') {
      miss = 'its receipt was not applied (stays sent)';
    } else if (own && r.state !== own && RECEIPT_STATE_VALUES.has(r.state)) {
      miss = `ends ${r.state} though its receipt said ${own}`;
    } else if (!own && RECEIPT_STATE_VALUES.has(r.state)) {
      miss = `ends ${r.state} without a receipt of its own`;
    }
    if (miss) {
      bump(receiptMisses, miss);
      if (missExamples.length < 4) {
        missExamples.push(`${r.public_id} (${r.phone}): ${miss}; attempt ${r.attempt_id} "${r.result_info ?? ''}"`);
      }
    }
  }
  const missTotal = [...receiptMisses.values()].reduce((a, b) => a + b, 0);
  rows.push({
    check: 'every receipt applied to its own message',
    verdict: missTotal === 0 ? 'PASS' : 'FAIL',
    detail: missTotal === 0 ? 'each recipient ends as the receipt the SMSC sent for its own message said (or sent, without one)'
      : `${plural(missTotal, 'recipient')}: ${tally(receiptMisses)}`,
    ...(missExamples.length && { examples: missExamples }),
  });

  // 6. Duplicate submits at the SMSC (allowed by SMPP's at-least-once hand-over; reported).
  let dupDestinations = 0;
  let extraSubmits = 0;
  let twiceAccepted = 0;
  const dupByFault = new Map<string, number>();
  const repeatAfter = new Map<string, number>();
  const accepted = new Set([...campaign.accepted.values()].map((a) => a.phone));
  for (const [submits, acceptedIds, firstAt, lastAt] of input.submits.values()) {
    if (submits > 1) {
      dupDestinations++;
      extraSubmits += submits - 1;
      if (acceptedIds > 1) {
        twiceAccepted++;
      }
      // Named by the fault its first submit met (in flight up to a second before the injection).
      const fault = input.faultAt(firstAt + 1000) || 'before the first fault';
      bump(dupByFault, fault);
      repeatAfter.set(fault, Math.max(repeatAfter.get(fault) ?? 0, lastAt - firstAt));
    }
  }
  const neverSubmitted = [...accepted].filter((p) => !input.submits.has(p)).length;
  rows.push({
    check: 'duplicate submits (same recipient submitted more than once)',
    verdict: 'INFO',
    detail: `${plural(dupDestinations, 'recipient')} submitted more than once (${extraSubmits} extra submit_sm, ${twiceAccepted} given two SMSC ids, ` +
      `i.e. sent twice to the handset); by the fault the first submit met: ` +
      `${[...dupByFault].map(([f, n]) => `${f} ${n} (repeated up to ${((repeatAfter.get(f) ?? 0) / 1000).toFixed(1)} s later)`).join(', ') || 'none'}; ` +
      `${neverSubmitted} acknowledged recipients never submitted`,
  });

  // 7. Duplicate webhook deliveries (allowed: at-least-once; reported).
  rows.push({
    check: 'duplicate webhook deliveries (same message_id+gateway+result)',
    verdict: 'INFO',
    detail: `${receiver.duplicates.toLocaleString('en-US')} repeats over ${receiver.events.toLocaleString('en-US')} events received in ${receiver.posts.toLocaleString('en-US')} POSTs` +
      `${receiver.badPosts ? `; ${receiver.badPosts} POSTs without a JSON array` : ''}`,
  });
  return rows;
}

/** One recipient not at its expected result, with its attempt and carrier refs, for the report. */
async function describeRecipient(db: pg.Pool, r: RecipientRow, input: CheckInput): Promise<string> {
  const sim = r.phone ? input.submits.get(r.phone) : undefined;
  const simText = sim ? `SMSC saw ${sim[0]} submit(s), ${sim[1]} accepted` : 'never submitted to the SMSC';
  const hooks = input.receiver.results.get(r.public_id)?.join(',') ?? 'none';
  if (r.attempt_id === null) {
    const { rows: [q] } = await db.query<{ due_at: Date | null; created_at: Date; pending: boolean | null }>(
      `SELECT r.due_at, r.created_at, m.dispatch_pending AS pending FROM recipients r JOIN messages m ON m.id = r.message_id
        WHERE r.public_id = $1`, [r.public_id]);
    return `${r.public_id} (${r.phone}): state ${r.state}, no attempt; accepted ${q?.created_at.toISOString()}, ` +
      `due_at ${q?.due_at?.toISOString() ?? 'null'}, dispatch_pending ${q?.pending}; ${simText}; webhooks: ${hooks}`;
  }
  const { rows: [a] } = await db.query<{ state: string; handed_at: Date | null; created_at: Date; updated_at: Date; refs: string | null }>(
    `SELECT a.state, a.handed_at, a.created_at, a.updated_at,
            (SELECT string_agg(c.ref || ':' || c.state, ' ') FROM carrier_refs c WHERE c.attempt_id = a.id) AS refs
       FROM attempts a WHERE a.id = $1`, [r.attempt_id]);
  return `${r.public_id} (${r.phone}): attempt ${r.attempt_id} ${a?.state} "${r.result_info ?? ''}", created ${a?.created_at.toISOString()}, ` +
    `handed ${a?.handed_at?.toISOString() ?? 'never'}, updated ${a?.updated_at.toISOString()}, refs ${a?.refs ?? 'none'}; ${simText}; webhooks: ${hooks}`;
}
