/**
 * Applying carrier reports and ttl expiries in batches. One transaction per batch: resolve
 * carrier refs to attempts, lock the attempts, move each along its allowed path (duplicates and
 * late reports fall out as "no move"), refund attempts that failed before reaching `sent`, move
 * the recipient on to its next flow step when its current step's attempt failed, and write exactly
 * one event per state entered. The recipient row itself changes only then: its state is its
 * current attempt's. Late reports of abandoned steps are reported but never start anything (D3).
 */
import { prepared, withTx, type Queryable, type Tx } from '../db/pool.js';
import { arrayRows, boolArray, numberArray, textArray, timestampArray } from '../db/arrays.js';
import { namedParams } from '../db/params.js';
import type { PriorHandOvers, StatusReport } from '../carriers/types.js';
import { smsGatewayOf, stepOf, type AttemptState } from '../channels/index.js';
import { planTransition, planReceiptTransition, startsNextStep, isRefunded, isLateSent, ttlExpiryApplies, defaultResultInfo, FINAL_STATES,
  keepsEarlierReceipt, STATE_RANK } from './transitions.js';
import { ATTEMPT_FACT_COLUMNS, factsOf, type AttemptFacts } from './attempt-facts.js';
import type { MessageFacts } from './message-facts.js';
import { EVENT_PARAMS, eventsCtes, eventParams, SentMessageBody, type OutboxEvent } from './events.js';
import { mayHoldTtlTimer } from './ttl-timers.js';
import type { EngineDeps, NextStep } from './types.js';
import { ascending } from '../collections.js';
import { PayerSums } from '../domain/payer.js';
import { toUnits, fromUnits } from '../domain/money.js';
import { countReportsApplied } from '../metrics.js';

/**
 * What a status batch locks and reads of each attempt: what changes. The rest is the attempt's
 * facts (attempt-facts.ts), which never change once dispatch wrote them.
 */
interface AttemptNow {
  id: number;
  state: AttemptState;
  refunded: boolean;
  reached_sent: boolean;
  ttl_expired: boolean;
  /** The connection that carried it. */
  carrier: string;
  /** The recipient's step now (a fallback moves it on). */
  current_step: number;
  /** The key's, read when the event is written (D4). */
  default_callback_url: string | null;
}

/** One requested move of an attempt. */
interface Move {
  attemptId: number;
  state: AttemptState;
  resultInfo: string;
  at: number;
  ttl: boolean;
  /** From a receipt that named a carrier ref registered to the attempt (`planReceiptTransition`). */
  receipt: boolean;
  /** The connection that reported it by attempt id: the move applies only to an attempt it carried. */
  carrier?: string;
}

/** A status batch that takes longer (a lock held elsewhere, an unreachable database) is abandoned. */
const STATUS_TX_TIMEOUT_MS = 10_000;

export interface ApplyOutcome {
  transitions: number;
  events: number;
}

export async function applyReports(deps: EngineDeps, reports: StatusReport[], ttlAttemptIds: number[] = []): Promise<ApplyOutcome> {
  const now = Date.now();
  const outcome = await withTx(deps.db, applyInTx, { indexOnly: true, timeoutMs: STATUS_TX_TIMEOUT_MS }, { deps, reports, ttlAttemptIds, now });
  countReportsApplied(reports.length + ttlAttemptIds.length);
  // The reports are durable from here on: whoever waits for them need not wait for Redis too. A
  // next step that cannot be enqueued now is found by the recovery sweep (its recipient is queued
  // and due).
  deps.enqueueNextSteps(outcome.nextSteps).catch((err: unknown) =>
    deps.logger.error({ err: (err as Error).message, count: outcome.nextSteps.length }, 'next flow steps not enqueued; left to the recovery sweep'));
  // Settled attempts need their timers no more. One left behind fires later and changes nothing.
  deps.ttlTimers.clear(outcome.settled).catch((err: unknown) =>
    deps.logger.warn({ err: (err as Error).message, count: outcome.settled.length }, 'ttl timers of settled attempts not removed; they fire as no-ops'));
  return { transitions: outcome.transitions, events: outcome.events.length };
}

interface ApplyTxInput {
  deps: EngineDeps;
  reports: StatusReport[];
  ttlAttemptIds: number[];
  now: number;
}

interface ApplyTxResult {
  transitions: number;
  events: OutboxEvent[];
  nextSteps: NextStep[];
  delivered: number[];
  sources: string[];
  /** Attempts that may hold a ttl timer and met their step's condition or ended (mayHoldTtlTimer). */
  settled: number[];
}

// A module-level function, not an arrow per batch (see the helpers below).
async function applyInTx(tx: Tx, input: ApplyTxInput): Promise<ApplyTxResult> {
  const { deps, reports, ttlAttemptIds, now } = input;
  const moves = await resolveMoves(tx, reports);
  for (const attemptId of ttlAttemptIds) {
    moves.push({ attemptId, state: 'undelivered', resultInfo: '[1] TTL expired', at: now, ttl: true, receipt: false });
  }
  if (moves.length === 0) {
    return { transitions: 0, events: [] as OutboxEvent[], nextSteps: [] as NextStep[], delivered: [] as number[], sources: [] as string[], settled: [] as number[] };
  }
  const ids = attemptIdsOf(moves);
  const attempts = new Map<number, AttemptNow>();
  let facts: Map<number, AttemptFacts>;
  if (deps.attemptFacts.knowsAny(ids)) {
    // As a rule: this process dispatched them. Lock and read what changes; the rest is known.
    const { rows } = await tx.query<AttemptNow>(prepared(LOCK_ATTEMPTS_SQL, [numberArray(ids)]));
    const rowIds: number[] = [];
    for (const row of rows) {
      attempts.set(row.id, row);
      rowIds.push(row.id);
    }
    facts = await deps.attemptFacts.load(tx, rowIds);
  } else {
    // Dispatched elsewhere (the web process's callbacks, the status pool, a restart): the whole
    // rows in the same round trip, their facts remembered for the attempts' next reports.
    const { rows } = await tx.query<AttemptNow & AttemptFacts>(prepared(LOCK_ATTEMPTS_WITH_FACTS_SQL, [numberArray(ids)]));
    facts = new Map();
    for (const row of rows) {
      attempts.set(row.id, row);
      facts.set(row.id, row);
      deps.attemptFacts.remember(factsOf(row));
    }
  }
  // The messages' facts come from the process's cache too (see message-facts.ts), not from a join.
  const messageIds = new Set<string>();
  for (const f of facts.values()) {
    messageIds.add(f.message_id);
  }
  const messages = await deps.messageFacts.load(tx, messageIds);
  // Apply each attempt's moves along the state path (a parked receipt can carry an earlier
  // carrier time than the submit response that releases it); ttl expiries come last.
  moves.sort(byStateRank);

  const events: OutboxEvent[] = [];
  /**
   * Attempt id → the result_info of the last state it entered in this batch (null: none, only a
   * late `sent` reported), and when it reached sent / delivered.
   */
  const changed = new Map<number, { resultInfo: string | null; sent: Date | null; delivered: Date | null }>();
  /** Recipients moving on to their next flow step. */
  const fallbacks = new Map<number, { step: number; due: Date }>();
  const nextSteps: NextStep[] = [];
  const refunds: AttemptFacts[] = [];
  const delivered: number[] = [];
  const sources: string[] = [];
  const settled: number[] = [];
  /** Attempts a connection named that it did not carry (see `Move.carrier`). */
  const foreign: number[] = [];

  for (const move of moves) {
    const a = attempts.get(move.attemptId);
    const f = a && facts.get(a.id);
    const m = f && messages.get(f.message_id);
    if (!a || !f || !m) {
      continue;
    }
    if (move.carrier !== undefined && move.carrier !== a.carrier) {
      foreign.push(a.id);
      continue;
    }
    if (move.ttl && !ttlExpiryApplies(f.channel, a.state)) {
      continue;
    }
    const path = move.receipt ? planReceiptTransition(f.channel, a.state, move.state, a.ttl_expired) : planTransition(a.state, move.state, a.ttl_expired);
    if (!path) {
      if (isLateSent(f.channel, a.state, move.state, a.reached_sent)) {
        // Reported and recorded; the state, its result_info and updated_at (null result_info: both
        // kept; the lookup reads updated_at as a final attempt's receipt time) and the refund stay.
        events.push(sentMessageEvent(f, m, a, 'sent', move.resultInfo, move.at));
        a.reached_sent = true;
        const late = changed.get(a.id) ?? { resultInfo: null, sent: null, delivered: null };
        late.sent = new Date(move.at);
        changed.set(a.id, late);
      }
      continue;
    }
    if (move.ttl) {
      a.ttl_expired = true;
    }
    const change = changed.get(a.id) ?? { resultInfo: null, sent: null, delivered: null };
    for (const state of path) {
      a.state = state;
      const resultInfo = state === move.state ? move.resultInfo : defaultResultInfo(state);
      events.push(sentMessageEvent(f, m, a, state, resultInfo, move.at));
      change.resultInfo = resultInfo;
      if (state === 'sent') {
        change.sent = new Date(move.at);
        a.reached_sent = true; // also on a path through it (planReceiptTransition)
      } else if (state === 'delivered') {
        change.delivered = new Date(move.at);
      }
    }
    changed.set(a.id, change);
    if (a.state === 'sent' || a.state === 'delivered' || a.state === 'seen') {
      a.reached_sent = true;
    }
    if (isRefunded(a.state, a.reached_sent, move.ttl) && !a.refunded && f.charged > 0) {
      a.refunded = true;
      refunds.push(f);
    }
    if (a.state === 'delivered') {
      delivered.push(f.recipient_id);
      sources.push(m.source);
    }
    if (a.state === 'delivered' || FINAL_STATES.has(a.state)) {
      // Its reports are done as a rule; a later one (a repeat, `seen`) reads the facts again.
      deps.attemptFacts.forget(a.id);
    }
    if (mayHoldTtlTimer(f.channel) && !ttlExpiryApplies(f.channel, a.state)) {
      settled.push(a.id);
    }
    if (f.step !== a.current_step) {
      continue; // an abandoned step: reported above, never moves the recipient (D3)
    }
    const nextStep = m.flow[f.step + 1];
    if (startsNextStep(f.channel, a.state, a.reached_sent) && nextStep !== undefined && nextStep !== null) {
      fallbacks.set(f.recipient_id, { step: f.step + 1, due: new Date(now) });
      a.current_step = f.step + 1;
      nextSteps.push({ messageId: f.message_id, step: f.step + 1, recipientId: f.recipient_id, lane: m.lane, channel: stepOf(nextStep).channel });
    }
  }
  if (foreign.length > 0) {
    deps.logger.warn({ attempts: foreign.slice(0, 10), count: foreign.length },
      'status reports naming attempts their connection did not carry; ignored');
  }

  if (changed.size === 0) {
    return { transitions: 0, events, nextSteps, delivered, sources, settled };
  }
  // Attempts, fallbacks and events in one statement: one round trip for the whole batch. The
  // transaction's client is idle here, so the bodies' buffer may be lent (see eventParams).
  await tx.query(prepared(APPLY_SQL, APPLY.values({ ...changeColumns(changed, attempts), ...fallbackColumns(fallbacks), ...eventParams(events, 'borrow') })));
  await refund(tx, refunds);
  if (deps.hooks.onDelivered && delivered.length > 0) {
    await deps.hooks.onDelivered(tx, delivered, sources);
  }
  return { transitions: changed.size, events, nextSteps, delivered, sources, settled };
}

// Module-level helpers and loops instead of per-call arrows on this path (docs/architecture.md,
// "Hot loops").

/** The `sentMessage` event of an attempt entering (or, late, reporting) `state`. */
function sentMessageEvent(f: AttemptFacts, m: MessageFacts, a: AttemptNow, state: AttemptState, resultInfo: string, at: number): OutboxEvent {
  return {
    accountId: f.account_id, keyId: f.key_id, callbackUrl: m.callback ?? a.default_callback_url,
    recipientId: f.recipient_id, kind: 'sentMessage',
    body: new SentMessageBody({
      requestId: m.request_id, publicId: f.public_id, channel: f.channel, payload: m.payload, phone: f.phone,
      state, resultInfo, at, sender: f.sender, country: f.country, operator: f.operator,
      priceCzk: f.price_czk, priceEur: f.price_eur, count: f.parts, smsGateway: f.channel === 'sms' ? smsGatewayOf(m.flow[f.step]) : null,
    }),
  };
}

/** The distinct attempt ids of a batch's moves, ascending (rows are locked in this order). */
function attemptIdsOf(moves: Move[]): number[] {
  const ids = new Set<number>();
  for (const m of moves) {
    ids.add(m.attemptId);
  }
  return [...ids].sort(ascending);
}

/** Moves along the state path; ttl expiries last. */
const byStateRank = (a: Move, b: Move): number => (a.ttl ? 9 : STATE_RANK[a.state]) - (b.ttl ? 9 : STATE_RANK[b.state]);

/**
 * What may change of a locked attempt: its state and flags, its recipient's step, its key's default
 * callback URL; and the connection that carried it, which a report by attempt id must come from.
 */
const ATTEMPT_NOW_COLUMNS = 'a.state, a.refunded, a.reached_sent, a.ttl_expired, a.carrier, r.step AS current_step, k.default_callback_url';
/** The batch's attempts locked in id order (`$1`: their ids, ascending). */
const LOCKED_ATTEMPTS = `FROM attempts a
       JOIN recipients r ON r.id = a.recipient_id
       JOIN api_keys k ON k.id = r.key_id
      WHERE a.id = ANY($1)
      ORDER BY a.id
        FOR UPDATE OF a`;
const LOCK_ATTEMPTS_SQL = `SELECT a.id, ${ATTEMPT_NOW_COLUMNS}
       ${LOCKED_ATTEMPTS}`;
/** The same with the attempts' facts, for attempts this process knows nothing of. */
const LOCK_ATTEMPTS_WITH_FACTS_SQL = `SELECT ${ATTEMPT_FACT_COLUMNS}, ${ATTEMPT_NOW_COLUMNS}
       ${LOCKED_ATTEMPTS}`;

const CHANGE_PARAMS = ['id', 'state', 'result_info', 'reached_sent', 'refunded', 'ttl_expired', 'sent_at', 'delivered_at'] as const;
const FALLBACK_PARAMS = ['fallback_id', 'fallback_step', 'fallback_due'] as const;
const APPLY = namedParams([...CHANGE_PARAMS, ...FALLBACK_PARAMS, ...EVENT_PARAMS]);
const $ = APPLY.$;
/** Changed attempts, recipients moving on to their next step, and the events, in one statement. */
const APPLY_SQL = `WITH attempts_up AS (
       UPDATE attempts a SET state = u.state, result_info = COALESCE(u.result_info, a.result_info), reached_sent = u.reached_sent,
              refunded = u.refunded, ttl_expired = u.ttl_expired, handed_at = COALESCE(a.handed_at, now()),
              sent_at = COALESCE(a.sent_at, u.sent_at), delivered_at = COALESCE(a.delivered_at, u.delivered_at),
              updated_at = CASE WHEN u.result_info IS NULL THEN a.updated_at ELSE now() END
         FROM ${arrayRows({
           id: `${$.id}::bigint[]`, state: `${$.state}::text[]`, result_info: `${$.result_info}::text[]`, reached_sent: `${$.reached_sent}::boolean[]`,
           refunded: `${$.refunded}::boolean[]`, ttl_expired: `${$.ttl_expired}::boolean[]`, sent_at: `${$.sent_at}::timestamptz[]`,
           delivered_at: `${$.delivered_at}::timestamptz[]`,
         })} AS u
        WHERE a.id = u.id AND a.id = ANY(${$.id})),
     recipients_on AS (
       UPDATE recipients r SET step = u.step, due_at = u.due_at
         FROM ${arrayRows({ id: `${$.fallback_id}::bigint[]`, step: `${$.fallback_step}::smallint[]`, due_at: `${$.fallback_due}::timestamptz[]` })} AS u
        WHERE r.id = u.id AND r.id = ANY(${$.fallback_id})),
     ${eventsCtes($)}
     SELECT 1`;

/** The update's values for each changed attempt's new state, in the order of `changed`. */
function changeColumns(
  changed: Map<number, { resultInfo: string | null; sent: Date | null; delivered: Date | null }>, attempts: Map<number, AttemptNow>,
): Record<(typeof CHANGE_PARAMS)[number], string> {
  const id: number[] = [], state: string[] = [], resultInfo: Array<string | null> = [], sent: Array<Date | null> = [], delivered: Array<Date | null> = [];
  const reachedSent: boolean[] = [], refunded: boolean[] = [], ttlExpired: boolean[] = [];
  for (const [attemptId, change] of changed) {
    const a = attempts.get(attemptId)!;
    id.push(a.id);
    state.push(a.state);
    resultInfo.push(change.resultInfo);
    reachedSent.push(a.reached_sent);
    refunded.push(a.refunded);
    ttlExpired.push(a.ttl_expired);
    sent.push(change.sent);
    delivered.push(change.delivered);
  }
  return {
    id: numberArray(id), state: textArray(state), result_info: textArray(resultInfo), reached_sent: boolArray(reachedSent),
    refunded: boolArray(refunded), ttl_expired: boolArray(ttlExpired), sent_at: timestampArray(sent), delivered_at: timestampArray(delivered),
  };
}

/** The update's values for recipients moving on to their next step. */
function fallbackColumns(fallbacks: Map<number, { step: number; due: Date }>): Record<(typeof FALLBACK_PARAMS)[number], string> {
  const id: number[] = [], step: number[] = [], due: Date[] = [];
  for (const [recipientId, f] of fallbacks) {
    id.push(recipientId);
    step.push(f.step);
    due.push(f.due);
  }
  return { fallback_id: numberArray(id), fallback_step: numberArray(step), fallback_due: timestampArray(due) };
}

/** What a batch says about one (carrier, ref): the attempt registering it, and its latest receipt. */
interface RefRow {
  ref: string;
  carrier: string;
  attemptId: number | null;
  part: number;
  receipt: StatusReport | null;
}

const refKey = (ref: string, carrier: string): string => `${ref}\u0000${carrier}`;

/**
 * One row per (ref, carrier), in key order (concurrent batches then take the keys in one order),
 * and the same rows by key.
 */
function refRows(reports: StatusReport[]): { rows: RefRow[]; byKey: Map<string, RefRow> } {
  const keyed = new Map<string, RefRow>();
  for (const r of reports) {
    if (r.ref === undefined || r.carrier === undefined) {
      continue;
    }
    const key = refKey(r.ref, r.carrier);
    const row = keyed.get(key) ?? { ref: r.ref, carrier: r.carrier, attemptId: null, part: 0, receipt: null };
    if (r.attemptId === undefined) {
      if (row.receipt === null || !keepsEarlierReceipt(row.receipt.state, r.state)) row.receipt = r;
    } else if (row.attemptId === null) {
      row.attemptId = r.attemptId;
      row.part = r.part ?? 0;
    }
    keyed.set(key, row);
  }
  const keys = [...keyed.keys()].sort();
  const sorted: RefRow[] = [];
  for (const key of keys) {
    sorted.push(keyed.get(key)!);
  }
  return { rows: sorted, byKey: keyed };
}

const REF_PARAMS = namedParams(['ref', 'carrier', 'attempt_id', 'part', 'state', 'result_info', 'reported_at']);

const R = REF_PARAMS.$;
/** `STATE_RANK` of a state column, in SQL. */
const rankSql = (column: string): string =>
  `CASE ${column} ${Object.entries(STATE_RANK).map(([state, rank]) => `WHEN '${state}' THEN ${rank}`).join(' ')} END`;
/**
 * A ref's row keeps the receipt it holds (parked, or a part's) when the incoming row has none (a
 * registration) or one less far along (`keepsEarlierReceipt`, the same rule as within a batch).
 */
const KEEPS_RECEIPT = `(EXCLUDED.result_info IS NULL OR (c.result_info IS NOT NULL AND ${rankSql('c.state')} > ${rankSql('EXCLUDED.state')}))`;
/**
 * A registration of a ref that another attempt registered before takes the row over: the SMSC
 * issued the id again (many count from 1 again after a restart, or wrap), and its receipts from
 * now on name the new message. The earlier attempt's row, with its receipt, is replaced by the
 * new registration's (docs/smpp.md, "Receipts").
 */
const TAKES_OVER = '(EXCLUDED.attempt_id IS NOT NULL AND c.attempt_id IS NOT NULL AND c.attempt_id <> EXCLUDED.attempt_id)';
/** The row keeps its receipt: `KEEPS_RECEIPT`, unless the row is taken over. */
const ROW_KEEPS_RECEIPT = `(${KEEPS_RECEIPT} AND NOT ${TAKES_OVER})`;
/**
 * Registers refs and records receipts (see `resolveMoves`). The rows stay a function in FROM, not
 * `arrayRows`: the CTE is read twice, so it is materialised either way, and the numbering that
 * keeps the insert in key order (concurrent batches take the keys in one order) comes with it
 * (docs/benchmarks.md, "Batches without a function in FROM"). Parameters: one element per ref
 * row (`refColumns`); `state`, `result_info` and `reported_at` are null for a registration.
 */
const RESOLVE_REFS_SQL = `WITH u AS (
       SELECT * FROM unnest(${R.ref}::text[], ${R.carrier}::text[], ${R.attempt_id}::bigint[], ${R.part}::int[], ${R.state}::text[],
                            ${R.result_info}::text[], ${R.reported_at}::timestamptz[]) WITH ORDINALITY
           AS u(ref, carrier, attempt_id, part, state, result_info, reported_at, n)),
     registered AS (
       SELECT u.ref, u.carrier, r.attempt_id
         FROM u JOIN carrier_refs r ON r.ref = u.ref AND r.carrier = u.carrier JOIN attempts a ON a.id = r.attempt_id
        WHERE u.attempt_id IS NULL AND a.parts = 1),
     c AS (
       INSERT INTO carrier_refs AS c (ref, carrier, attempt_id, part, state, result_info, reported_at)
       SELECT u.ref, u.carrier, u.attempt_id, u.part, COALESCE(u.state, 'sent'), u.result_info, u.reported_at
         FROM u
        WHERE NOT EXISTS (SELECT 1 FROM registered g WHERE g.ref = u.ref AND g.carrier = u.carrier)
        ORDER BY u.n
       ON CONFLICT (ref, carrier) DO UPDATE SET
         attempt_id = CASE WHEN ${TAKES_OVER} THEN EXCLUDED.attempt_id ELSE COALESCE(c.attempt_id, EXCLUDED.attempt_id) END,
         part = CASE WHEN c.attempt_id IS NULL OR ${TAKES_OVER} THEN EXCLUDED.part ELSE c.part END,
         state = CASE WHEN ${ROW_KEEPS_RECEIPT} THEN c.state ELSE EXCLUDED.state END,
         result_info = CASE WHEN ${ROW_KEEPS_RECEIPT} THEN c.result_info ELSE EXCLUDED.result_info END,
         reported_at = CASE WHEN ${ROW_KEEPS_RECEIPT} THEN c.reported_at ELSE EXCLUDED.reported_at END,
         created_at = CASE WHEN ${TAKES_OVER} THEN now() ELSE c.created_at END
       RETURNING c.ref, c.carrier, c.attempt_id, c.state, c.result_info, c.reported_at)
     SELECT c.ref, c.carrier, c.attempt_id, c.state, c.result_info, c.reported_at, a.parts, false AS registered
       FROM c JOIN attempts a ON a.id = c.attempt_id
      WHERE c.result_info IS NOT NULL
     UNION ALL
     SELECT g.ref, g.carrier, g.attempt_id, NULL, NULL, NULL, 1, true FROM registered g`;

/** The ref statement's values (see `resolveMoves`). */
function refColumns(rows: RefRow[]): unknown[] {
  const ref: string[] = [], carrier: string[] = [], attemptId: Array<number | null> = [], part: number[] = [];
  const state: Array<string | null> = [], resultInfo: Array<string | null> = [], at: Array<Date | number | null> = [];
  for (const r of rows) {
    ref.push(r.ref);
    carrier.push(r.carrier);
    attemptId.push(r.attemptId);
    part.push(r.part);
    state.push(r.receipt?.state ?? null);
    resultInfo.push(r.receipt?.resultInfo ?? null);
    at.push(r.receipt?.at ?? null);
  }
  return REF_PARAMS.values({
    ref: textArray(ref), carrier: textArray(carrier), attempt_id: numberArray(attemptId), part: numberArray(part), state: textArray(state),
    result_info: textArray(resultInfo), reported_at: timestampArray(at),
  });
}

/**
 * Turn carrier reports into moves on attempt ids. Reports that name a carrier ref are matched
 * through `carrier_refs`, in one statement that both registers refs (submit responses) and
 * records receipts (those of registered one-part attempts are only looked up). A receipt whose
 * ref is not registered yet (it overtook its submit response) stays parked in that row without an
 * attempt; registering the ref later returns it, and it is applied then. Both sides write the
 * same unique key in one sorted statement, so concurrent batches are serialised by the index
 * itself and cannot deadlock on each other's keys. For multi-part SMS the attempt is `delivered`
 * only when every part is; the first failed part decides a failure.
 */
async function resolveMoves(tx: Tx, reports: StatusReport[]): Promise<Move[]> {
  const moves: Move[] = [];
  for (const r of reports) {
    // Nothing moves to `sending`: such a report (a carrier's acceptance, with its ref) only
    // registers the ref below, without locking the attempt.
    if (r.attemptId !== undefined && r.state !== 'sending') {
      const move: Move = { attemptId: r.attemptId, state: r.state, resultInfo: r.resultInfo, at: r.at, ttl: false, receipt: false };
      if (r.carrier !== undefined) move.carrier = r.carrier;
      moves.push(move);
    }
  }
  const { rows, byKey } = refRows(reports);
  if (rows.length === 0) {
    return moves;
  }
  // A receipt whose ref is registered already (committed before this statement began) to a
  // one-part attempt is applied without writing its row: nothing reads a one-part ref's receipt
  // again (a repeated receipt is no move), so only the attempt changes. Every other row goes
  // through the upsert: registrations, receipts of long messages (their parts are counted below),
  // and receipts not registered yet, which may meet a registration committing meanwhile.
  const { rows: stored } = await tx.query<{
    ref: string; carrier: string; attempt_id: number; state: AttemptState; result_info: string | null; reported_at: Date | null;
    parts: number; registered: boolean;
  }>(prepared(RESOLVE_REFS_SQL, refColumns(rows)));
  // A receipt to apply: one of this batch, or one parked earlier that this batch's register found
  // (replaying a receipt applied before is no move, so a repeated register changes nothing). The
  // statement returns only those: not the refs registered without a receipt yet (half of its
  // rows, which only echoed what was sent), nor the receipts parked until their ref is registered
  // (no attempt to join).
  const receipts: Array<{ attemptId: number; parts: number; report: StatusReport }> = [];
  for (const row of stored) {
    const own = byKey.get(refKey(row.ref, row.carrier))?.receipt;
    if (row.registered) {
      receipts.push({ attemptId: row.attempt_id, parts: 1, report: own! });
      continue;
    }
    // The row's receipt, unless this batch brought one the row took (a parked or part receipt
    // further along stays: `KEEPS_RECEIPT`, and is what is applied).
    const report = own && !keepsEarlierReceipt(row.state, own.state)
      ? own
      : { carrier: row.carrier, ref: row.ref, state: row.state, resultInfo: row.result_info!, at: row.reported_at?.getTime() ?? Date.now() };
    receipts.push({ attemptId: row.attempt_id, parts: row.parts, report });
  }
  const complete = new Map<number, boolean>();
  const delivering = new Set<number>();
  for (const r of receipts) {
    if (r.parts > 1 && r.report.state === 'delivered') delivering.add(r.attemptId);
  }
  const multiPart = [...delivering];
  if (multiPart.length > 0) {
    // Receipts for different parts of one message may be applied by concurrent batches, each
    // counting the delivered parts below: they take turns per attempt, or none would see them all.
    await tx.query(
      `SELECT pg_advisory_xact_lock(hashtextextended('attempt' || chr(1) || id::text, 0)) FROM (SELECT unnest($1::bigint[]) AS id ORDER BY 1) s`,
      [multiPart],
    );
    const { rows: partStates } = await tx.query<{ attempt_id: number; delivered: number; parts: number }>(
      `SELECT c.attempt_id, count(*) FILTER (WHERE c.state = 'delivered')::int AS delivered, a.parts
         FROM carrier_refs c JOIN attempts a ON a.id = c.attempt_id
        WHERE c.attempt_id = ANY($1) GROUP BY c.attempt_id, a.parts`,
      [multiPart],
    );
    for (const p of partStates) {
      complete.set(p.attempt_id, p.delivered >= p.parts);
    }
  }
  for (const { attemptId, report } of receipts) {
    if (report.state === 'delivered' && complete.get(attemptId) === false) {
      continue; // more parts still to be delivered
    }
    moves.push({ attemptId, state: report.state, resultInfo: report.resultInfo, at: report.at, ttl: false, receipt: true });
  }
  return moves;
}

/** Give the charge of each refunded attempt back to its payer, summed per payer, in the payers' key order (`PayerSums`). */
async function refund(tx: Tx, attempts: AttemptFacts[]): Promise<void> {
  const sums = new PayerSums();
  for (const a of attempts) {
    if (!a.payer_kind || a.payer_id === null || !a.charged_currency) {
      continue;
    }
    sums.add({ kind: a.payer_kind, id: a.payer_id, currency: a.charged_currency }, toUnits(a.charged));
  }
  for (const { payer, units } of sums.inOrder()) {
    // The same balance change as the dispatch's debits (migration 013), with a positive delta.
    await tx.query('SELECT change_credit($1, $2, $3, $4)', [payer.kind, payer.id, payer.currency, fromUnits(units)]);
  }
}

/**
 * Of `refs`, those registered under `carrier` to attempts still waiting for a receipt (not final;
 * for a multi-part message, a part not yet reported): what a receipt id read several ways may mean
 * (CarrierSink.matchRefs).
 */
export async function matchWaitingRefs(db: Queryable, carrier: string, refs: string[]): Promise<string[]> {
  if (refs.length === 0) return [];
  const { rows } = await db.query<{ ref: string }>(prepared(
    `SELECT c.ref FROM carrier_refs c JOIN attempts a ON a.id = c.attempt_id
      WHERE c.carrier = $1 AND c.ref = ANY($2::text[]) AND a.state IN ('sending', 'sent') AND (a.parts = 1 OR c.state = 'sent')`,
    [carrier, textArray(refs)]));
  return rows.map((r) => r.ref);
}

/**
 * What Postgres recorded of the hand-overs of `attemptIds` under `carrier`
 * (CarrierSink.priorHandOvers): one row per registered part, or one with no part for an attempt
 * with none; `handed` is the condition under which the engine no longer hands an attempt over
 * (dispatch). $1: the carrier; $2: the attempt ids (primary key, index `carrier_refs_attempt`).
 */
const PRIOR_HAND_OVERS_SQL = `SELECT a.id::float8 AS "attemptId", (a.handed_at IS NOT NULL OR a.state <> 'sending') AS handed, c.part, c.ref
       FROM attempts a LEFT JOIN carrier_refs c ON c.attempt_id = a.id AND c.carrier = $1
      WHERE a.id = ANY($2::bigint[])`;

export async function priorHandOvers(db: Queryable, carrier: string, attemptIds: number[]): Promise<PriorHandOvers> {
  const out: PriorHandOvers = { handed: [], parts: [] };
  if (attemptIds.length === 0) return out;
  const { rows } = await db.query<{ attemptId: number; handed: boolean; part: number | null; ref: string | null }>(
    prepared(PRIOR_HAND_OVERS_SQL, [carrier, numberArray(attemptIds)]));
  const handed = new Set<number>();
  for (const row of rows) {
    if (row.handed) handed.add(row.attemptId);
    if (row.part !== null && row.ref !== null) out.parts.push({ attemptId: row.attemptId, part: row.part, ref: row.ref });
  }
  out.handed = [...handed];
  return out;
}
