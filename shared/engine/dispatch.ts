/**
 * Starting one flow step for the recipients of a dispatch job. In one transaction: write an
 * attempt per recipient still at this step (the attempts' unique (recipient, step) is the guard:
 * an attempt already there is left alone), with its price and charge, its `sending`/`rejected`
 * event, and take the credit (one conditional update per payer, never below zero). After the
 * commit: hand the attempts to their carriers, then record the hand-over, which clears what lets
 * the recovery sweep find this work (the message's `dispatch_pending`, the recipients' `due_at`),
 * and set the ttl timers of the attempts still waiting (one lost in between, with Redis or a
 * crash, is set again by the sweep's waiting-attempts pass, `RECEIPT_WAIT_HOURS` later).
 * A second run of the same job writes nothing and only re-hands attempts that never reached a
 * carrier (a crash between commit and hand-over).
 */
import { prepared, withTxEnding, type Tx, type TxEnd } from '../db/pool.js';
import { changeCreditStatement, CREDIT_NOT_COVERED } from '../domain/accounts.js';
import { arrayRows, numberArray, textArray, timestampArray } from '../db/arrays.js';
import { namedParams } from '../db/params.js';
import type { Carrier } from '../carriers/types.js';
import {
  channelModule, familyOf, planAttempt as planChannelAttempt, stepBody, stepOf, type AttemptState, type Channel, type ChannelStep, type FlowStep,
  type OutboundAttempt,
} from '../channels/index.js';
import { LANE_NUMBER, type DispatchJob } from '../queues.js';
import { planSms, type SmsPlan } from '../sms/gsm7.js';
import { mccOfE164 } from '../phone/mcc.js';
import { findPrice, currentPrices } from '../domain/prices.js';
import { attemptSender } from '../domain/numbers.js';
import { ROUTING_CONFIG_VERSION_SQL } from '../domain/routing-config.js';
import { inPayerOrder, payerKey, payerOf, PayerSums, type Payer, type PayerSum } from '../domain/payer.js';
import { fromUnits, round4, toUnits } from '../domain/money.js';
import { isInsideWindow, nextSendInstant, type DeliveryWindow } from '../schedule/window.js';
import { stepTtlMinutes, ttlExpiryApplies } from './transitions.js';
import { mayHoldTtlTimer, needsTtlTimer } from './ttl-timers.js';
import { EVENT_PARAMS, eventsCtes, eventParams, SentMessageBody, type OutboxEvent } from './events.js';
import type { EngineDeps, NextStep } from './types.js';
import { pushTo } from '../collections.js';
import type { AttemptFacts } from './attempt-facts.js';
import { refuseOptedOut } from '../suppression/store.js';

export interface MessageRow {
  id: string;
  request_id: string;
  account_id: number;
  key_id: number;
  body: string | null;
  flow: FlowStep[];
  callback: string | null;
  tag: string;
  lane: number;
  payload: string | null;
  send_at: Date | null;
  delivery_time: DeliveryWindow | null;
  source: string;
  dispatch_pending: boolean;
  key_shared: boolean;
  key_primary: boolean;
  key_currency: 'CZK' | 'EUR';
  default_callback_url: string | null;
  default_sender: string | null;
  /** Promotional, and the account has suppressions it enforces: dispatch looks its numbers up (issue 27). */
  opt_out_check: boolean;
  /** The stored routing configuration's version at this read, the same on every row (domain/routing-config.ts). */
  routing_config_version: number;
}

export async function loadMessages(db: EngineDeps['db'] | Tx, messageIds: string[]): Promise<Map<string, MessageRow>> {
  const { rows } = await db.query<MessageRow>(prepared(
    `SELECT m.id, m.request_id, m.account_id, m.key_id, m.body, m.flow, m.callback, m.tag, m.lane, m.payload,
            m.send_at, m.delivery_time, m.source, m.dispatch_pending, k.shared AS key_shared, k.is_primary AS key_primary,
            k.currency AS key_currency, k.default_callback_url, a.default_sender,
            (m.lane = ${LANE_NUMBER.promotional} AND a.suppressions > 0 AND a.opt_out_promotional) AS opt_out_check,
            ${ROUTING_CONFIG_VERSION_SQL} AS routing_config_version
       FROM messages m JOIN api_keys k ON k.id = m.key_id JOIN accounts a ON a.id = m.account_id
      WHERE m.id = ANY($1)`,
    [textArray(messageIds)]),
  );
  const byId = new Map<string, MessageRow>();
  for (const row of rows) {
    byId.set(row.id, row);
  }
  return byId;
}

/** When this step may run: the scheduled time and the delivery window (checked again when the job fires). */
export function dueInstant(msg: Pick<MessageRow, 'send_at' | 'delivery_time'>, now: Date): Date {
  let due = msg.send_at && msg.send_at > now ? msg.send_at : now;
  if (msg.delivery_time && !isInsideWindow(msg.delivery_time, due)) {
    due = nextSendInstant(msg.delivery_time, due);
  }
  return due;
}

interface RecipientRow {
  id: number;
  public_id: string;
  phone: string | null;
  /** The number as given, read only when it could not be normalised (`phone` null): the `[302]` event names it. */
  raw_phone: string | null;
  message_id: string;
  step: number;
  /** Set while a scheduled, deferred or later step waits for its hand-over (the sweep finds it by this). */
  due: boolean;
}

/** The recipients of a job as they are now; test-number recipients are never dispatched. */
async function loadRecipients(db: EngineDeps['db'], ids: number[]): Promise<RecipientRow[]> {
  const { rows } = await db.query<RecipientRow>(prepared(
    `SELECT id, public_id, phone, CASE WHEN phone IS NULL THEN raw_phone END AS raw_phone, message_id, step, due_at IS NOT NULL AS due FROM recipients
      WHERE id = ANY($1) AND state <> 'test' ORDER BY id`,
    [numberArray(ids)]),
  );
  return rows;
}

interface Planned {
  part: Part;
  recipient: RecipientRow;
  channel: Channel;
  carrier: Carrier | null;
  /** What the carrier is handed; `attemptId` is 0 until the attempt's row is written. */
  attempt: OutboundAttempt;
  /** Its sender as the row and the events give it: canonical, what a reply names (D5; domain/numbers.ts `attemptSender`). */
  sender: string;
  count: number;
  priceCzk: number;
  priceEur: number;
  country: number;
  /** Set when the attempt is rejected before leaving: result_info, and whether the flow goes on. */
  reject?: { info: string; fallback: boolean };
  /** Set once the attempt is charged. */
  charge?: { units: number; payer: Payer };
}

export interface DispatchOutcome {
  /** Set when nothing of the job may run yet: the job waits until then (and checks again). */
  delayUntil: Date | null;
  handed: number;
  rejected: number;
}

/** One message object of a dispatch run, with what its step means for it. */
interface Part {
  msg: MessageRow;
  recipientIds: number[];
  step: ChannelStep;
  ttlMinutes: number;
  /** The run it belongs to: its index in `dispatchRuns`' runs, and its hold. */
  run: number;
  hold: OutboundAttempt['hold'] | undefined;
}

/**
 * One dispatch job's run. `delaySelf`: the job may wait for a message's time itself (its id is that
 * message's step: it is what the sweep would add again). A call's job may not: a message of it that
 * may not run yet gets a delayed job of its own. `hold`: the run's hold on its job
 * (`OutboundAttempt.hold`); once it is not held, the carriers stop handing its attempts over.
 */
export interface DispatchRun {
  job: DispatchJob;
  delaySelf: boolean;
  hold?: OutboundAttempt['hold'];
}

/**
 * Start one flow step for the recipients of one or more message objects (a batch call's objects
 * travel in one job, so one transaction serves up to 100 recipients): one job's run alone
 * (`delaySelf`, `hold`: see `DispatchRun`).
 */
export async function dispatchStep(
  deps: EngineDeps, job: DispatchJob, now = new Date(), delaySelf = true, hold?: OutboundAttempt['hold'],
): Promise<DispatchOutcome> {
  const [outcome] = await dispatchRuns(deps, [{ job, delaySelf, hold }], now);
  return outcome!;
}

/**
 * Runs of jobs at one step, together (dispatch-batches.ts): one read of their messages and
 * recipients and one transaction for all, then one hand-over in which each attempt keeps its own
 * run's hold. Returns each run's outcome, in order; anything that fails fails them all (each job is
 * safe to run again). A recipient in two runs is its first run's. `committed` is called once the
 * transaction committed (or nothing was due), before the hand-over: from then on the runs need no
 * more of Postgres' time until they record it.
 */
export async function dispatchRuns(deps: EngineDeps, runs: DispatchRun[], now = new Date(), committed?: () => void): Promise<DispatchOutcome[]> {
  const step = runs[0]!.job.step;
  const messageIds: string[] = [];
  const recipientIds: number[] = [];
  for (const { job } of runs) {
    if (job.step !== step) throw new Error('dispatchRuns: the runs of one batch must be of one step');
    for (const m of job.messages) {
      messageIds.push(m.messageId);
      for (const id of m.recipientIds) recipientIds.push(id);
    }
  }
  const [messages, recipients] = await Promise.all([loadMessages(deps.db, messageIds), loadRecipients(deps.db, recipientIds)]);
  for (const msg of messages.values()) {
    deps.messageFacts.remember(msg); // for the status batches of these attempts
  }
  const outcomes: DispatchOutcome[] = runs.map(() => ({ delayUntil: null, handed: 0, rejected: 0 }));
  const due: Part[] = [];
  for (let run = 0; run < runs.length; run++) {
    const { job, delaySelf, hold } = runs[run]!;
    for (const item of job.messages) {
      const msg = messages.get(item.messageId);
      if (!msg || step >= msg.flow.length) {
        continue;
      }
      const at = dueInstant(msg, now);
      if (at.getTime() - now.getTime() > 1000) {
        // Not yet inside its schedule or window (a job released late, or a fallback step at night).
        // From here on the recipients' due_at finds them if this job is lost, not the message's flag.
        await deps.db.query(
          `WITH later AS (UPDATE recipients r SET due_at = $3 WHERE r.id = ANY($1) AND r.step = $2 AND r.state = 'queued'
                             AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.recipient_id = r.id AND a.step = $2))
           UPDATE messages SET dispatch_pending = false WHERE id = $4 AND dispatch_pending`,
          [numberArray(item.recipientIds), step, at, msg.id],
        );
        if (job.messages.length === 1 && delaySelf) {
          outcomes[run]!.delayUntil = at;
        } else {
          await deps.enqueueLater({ messageId: msg.id, step, recipientIds: item.recipientIds, lane: msg.lane, channel: stepOf(msg.flow[step]!).channel }, at);
        }
        continue;
      }
      due.push({ msg, recipientIds: item.recipientIds, step: stepOf(msg.flow[step]!), ttlMinutes: stepTtlMinutes(msg.flow, step), run, hold });
    }
  }
  if (due.length === 0) {
    committed?.();
    return outcomes;
  }
  // Recipients whose flow moved on to another step (a late duplicate job) are not this run's.
  // A job's ids may be numeric strings (the recovery sweep's come from an int8[] that pg leaves as
  // text), so the map is keyed by number, as the rows' ids are.
  const partOf = new Map<number, Part>();
  for (const p of due) {
    for (const id of p.recipientIds) {
      const key = Number(id);
      if (!partOf.has(key)) partOf.set(key, p);
    }
  }
  const atStep: RecipientRow[] = [];
  const dueRecipients: number[] = [];
  for (const r of recipients) {
    if (r.step !== step || partOf.get(r.id)?.msg.id !== r.message_id) continue;
    atStep.push(r);
    if (r.due) dueRecipients.push(r.id);
  }
  const flaggedMessages: string[] = [];
  if (step === 0) {
    for (const p of due) {
      if (p.msg.dispatch_pending) flaggedMessages.push(p.msg.id);
    }
  }
  // The messages' read brought the stored routing configuration's version: routes and prices older
  // than it are read again before this batch is planned (a change applies to what was accepted after it).
  const configVersion = due[0]!.msg.routing_config_version;
  const [prices] = await Promise.all([currentPrices(deps.db, configVersion), deps.carriers.catchUp(configVersion)]);

  // Optimistic first: write everything as charged and take the credit with one conditional debit per
  // payer sent together with the COMMIT, so a balance row is locked only while the server runs
  // those and flushes the commit (jobs of one account would otherwise queue behind each other's
  // transactions and round trips). When a balance cannot cover the batch (CREDIT_NOT_COVERED), the
  // transaction is rolled back and run again, allocating attempt by attempt under the lock until
  // the credit runs out.
  let result: DispatchTxResult;
  try {
    result = await runDispatchTx({ deps, partOf, recipients: atStep, step, prices, now, mode: 'optimistic' });
  } catch (err) {
    if ((err as { code?: string } | null)?.code !== CREDIT_NOT_COVERED) {
      throw err;
    }
    result = await runDispatchTx({ deps, partOf, recipients: atStep, step, prices, now, mode: 'allocate' });
  }

  // Committed: the status batches of these attempts need not read their facts back.
  for (const f of result.facts) {
    deps.attemptFacts.remember(f);
  }
  committed?.();
  for (const t of result.toHand) outcomes[t.part.run]!.handed++;
  for (const part of result.rejected) outcomes[part.run]!.rejected++;
  await handOver(deps, result.toHand, { step, flaggedMessages, dueRecipients });
  await afterHandedBefore(deps, result.handedBefore);
  await deps.enqueueNextSteps(result.nextSteps);
  return outcomes;
}

interface ToHand {
  carrier: Carrier;
  attempt: OutboundAttempt;
  part: Part;
}

interface DispatchTxResult {
  toHand: ToHand[];
  nextSteps: NextStep[];
  /** The part of each attempt written as rejected. */
  rejected: Part[];
  /** The facts of the attempts written and handed, to remember once the transaction committed. */
  facts: AttemptFacts[];
  /** Attempts of an earlier run whose hand-over is recorded, not handed again (see `afterHandedBefore`). */
  handedBefore: HandedBefore[];
}

/** An attempt an earlier run handed over, as a job run again finds it. */
interface HandedBefore {
  attemptId: number;
  /** The carrier that took it, when that one keeps a re-hand guard (`Carrier.handedOver`); else null. */
  carrier: Carrier | null;
  /** Its ttl timer's deadline (ms since the epoch) while its step still waits; else null. */
  due: number | null;
}

interface DispatchTxInput {
  deps: EngineDeps;
  /** Each recipient's part (of its message, in its run). */
  partOf: Map<number, Part>;
  recipients: RecipientRow[];
  step: number;
  prices: Awaited<ReturnType<typeof currentPrices>>;
  now: Date;
  mode: 'optimistic' | 'allocate';
}

function runDispatchTx(input: DispatchTxInput): Promise<DispatchTxResult> {
  return withTxEnding(input.deps.db, dispatchInTx, { indexOnly: true }, input);
}

// A module-level function, not an arrow per job: the largest function of the send path keeps its
// optimised code (docs/architecture.md, "Hot loops").
async function dispatchInTx(tx: Tx, input: DispatchTxInput): Promise<TxEnd<DispatchTxResult>> {
  const { deps, partOf, recipients, step, prices, now, mode } = input;
  const texts = new Map<number, string>();
  if (deps.hooks.resolveTexts) {
    const idsOf = new Map<Part, number[]>();
    for (const r of recipients) pushTo(idsOf, partOf.get(r.id)!, r.id);
    for (const [part, ids] of idsOf) {
      const resolved = await deps.hooks.resolveTexts(tx, part.msg.source, ids);
      if (resolved) {
        for (const [id, text] of resolved) texts.set(id, text);
      }
    }
  }

  // Allocating charges attempt by attempt: recipients whose attempt exists already are left out
  // first, so that their price does not count against the credit.
  let candidates = recipients;
  if (mode === 'allocate') {
    const { rows } = await tx.query<{ recipient_id: number }>(
      'SELECT recipient_id FROM attempts WHERE recipient_id = ANY($1) AND step = $2', [numberArray(recipients.map((r) => r.id)), step]);
    const existing = new Set(rows.map((row) => row.recipient_id));
    candidates = recipients.filter((r) => !existing.has(r.id));
  }
  const planSmsOf = smsPlanner();
  const planned: Planned[] = [];
  for (const r of candidates) {
    planned.push(planAttempt(deps, partOf.get(r.id)!, r, texts.get(r.id), prices, planSmsOf));
  }
  // Promotional attempts to numbers that opted out are refused here, uncharged ([304]).
  await refuseOptedOut(tx, planned);
  if (mode === 'optimistic') {
    assignCharges(planned);
  } else {
    await allocateCharges(tx, planned);
  }

  const events: OutboxEvent[] = [];
  const fall = { id: [] as number[], step: [] as number[], due: [] as Date[] };
  for (const p of planned) {
    const { msg } = p.part;
    const state = p.reject ? 'rejected' : 'sending';
    events.push({
      accountId: msg.account_id, keyId: msg.key_id, callbackUrl: msg.callback ?? msg.default_callback_url,
      recipientId: p.recipient.id, kind: 'sentMessage',
      body: new SentMessageBody({
        requestId: msg.request_id, publicId: p.recipient.public_id, channel: p.channel, payload: msg.payload,
        phone: p.recipient.phone ?? p.recipient.raw_phone ?? '', state, resultInfo: p.reject?.info ?? 'Sending', at: now.getTime(),
        sender: p.sender, country: p.country, operator: 0, priceCzk: p.priceCzk, priceEur: p.priceEur,
        count: p.count, smsGateway: p.attempt.channel === 'sms' ? p.attempt.smsGateway : null,
      }),
    });
    if (p.reject?.fallback === true && step + 1 < msg.flow.length) {
      fall.id.push(p.recipient.id);
      fall.step.push(step + 1);
      fall.due.push(now);
    }
  }
  // Attempts, the fallbacks of recipients refused before leaving, and events in one statement: one
  // round trip for the whole job. An attempt that exists already (the job ran before) is not
  // written again, and neither is anything else of its recipient. The transaction's client is idle
  // here, so the bodies' buffer may be lent (see eventParams).
  const { rows: inserted } = planned.length === 0 ? { rows: [] } : await tx.query<{ id: number; recipient_id: number }>(prepared(
    WRITE_ATTEMPTS_SQL,
    WRITE_ATTEMPTS.values({
      step, ...attemptColumns(deps, planned),
      fallback_id: numberArray(fall.id), fallback_step: numberArray(fall.step), fallback_due: timestampArray(fall.due),
      ...eventParams(events, 'borrow'),
    })),
  );

  const attemptIdOf = new Map<number, number>();
  for (const row of inserted) {
    attemptIdOf.set(row.recipient_id, row.id);
  }
  const written = inserted.length === planned.length ? planned : planned.filter((p) => attemptIdOf.has(p.recipient.id));
  const toHand: ToHand[] = [];
  const nextSteps: NextStep[] = [];
  const facts: AttemptFacts[] = [];
  for (const p of written) {
    const { msg } = p.part;
    if (p.reject?.fallback === true && step + 1 < msg.flow.length) {
      nextSteps.push({ messageId: msg.id, step: step + 1, recipientId: p.recipient.id, lane: msg.lane, channel: stepOf(msg.flow[step + 1]!).channel });
    } else if (!p.reject && p.carrier) {
      p.attempt.attemptId = attemptIdOf.get(p.recipient.id)!;
      toHand.push({ carrier: p.carrier, attempt: p.attempt, part: p.part });
      facts.push(attemptFactsOf(p, step));
    }
  }

  // Attempts of an earlier run that were charged and recorded but never reached a carrier (a
  // crash before the hand-over, a carrier that failed): handed again. Those whose hand-over is
  // recorded (by that run, or by the status path when their carrier's reports moved them on
  // meanwhile) are not handed again: that run may have died before what follows the record, so a
  // step still waiting for its condition gets its ttl timer again, due when it would have been
  // (the recovery sweep does the same, but only days later), and the carrier hears of the record.
  const handedBefore: HandedBefore[] = [];
  const carriersByName = new Map<string, Carrier | null>();
  const carrierNamed = (name: string): Carrier | null => {
    if (!carriersByName.has(name)) carriersByName.set(name, deps.carriers.byName(name));
    return carriersByName.get(name)!;
  };
  if (written.length < recipients.length) {
    const { rows } = await tx.query<{ id: number; recipient_id: number; state: AttemptState; carrier: string | null; unhanded: boolean; since_ms: number }>(
      `SELECT id, recipient_id, state, carrier, handed_at IS NULL AS unhanded,
              (extract(epoch FROM COALESCE(handed_at, created_at)) * 1000)::float8 AS since_ms
         FROM attempts WHERE recipient_id = ANY($1) AND step = $2`,
      [numberArray(recipients.filter((r) => !attemptIdOf.has(r.id)).map((r) => r.id)), step],
    );
    const byId = new Map(recipients.map((r) => [r.id, r]));
    for (const row of rows) {
      const r = byId.get(row.recipient_id)!;
      const part = partOf.get(r.id)!;
      if (row.state !== 'sending' || !row.unhanded) {
        const channel = part.step.channel;
        const waits = mayHoldTtlTimer(channel) && ttlExpiryApplies(channel, row.state);
        // The carrier that took it (its name on the row), when that one keeps a re-hand guard.
        const carrier = row.carrier === null ? null : carrierNamed(row.carrier);
        const guarded = carrier !== null && keepsRehandGuard(carrier);
        if (waits || guarded) {
          handedBefore.push({ attemptId: row.id, carrier: guarded ? carrier : null, due: waits ? row.since_ms + part.ttlMinutes * 60_000 : null });
        }
        continue;
      }
      const resolved = deps.hooks.resolveTexts ? await deps.hooks.resolveTexts(tx, part.msg.source, [r.id]) : null;
      const p = planAttempt(deps, part, r, resolved?.get(r.id), prices, planSmsOf);
      if (p.carrier) {
        // Handed before (its send may have got part way): the carrier checks what it already accepted.
        toHand.push({ carrier: p.carrier, attempt: { ...p.attempt, attemptId: row.id, rehand: true }, part });
      }
    }
  }

  // The debits travel with the COMMIT: the balance rows are locked for no client round trip. In
  // optimistic mode a balance that cannot cover its debit fails the commit (CREDIT_NOT_COVERED);
  // allocation never takes more than it read under the lock.
  const lastStatements: string[] = [];
  for (const d of debitsOf(written)) {
    lastStatements.push(changeCreditStatement(d.payer.kind, d.payer.id, d.payer.currency, -d.units));
  }
  return { result: { toHand, nextSteps, rejected: rejectedParts(written), facts, handedBefore }, lastStatements };
}

const ATTEMPT_PARAMS = [
  'recipient_id', 'channel', 'family', 'state', 'result_info', 'phone', 'sender', 'carrier', 'parts', 'encoding', 'country',
  'price_czk', 'price_eur', 'charged', 'charged_currency', 'payer_kind', 'payer_id', 'body',
] as const;
type AttemptParam = (typeof ATTEMPT_PARAMS)[number];
const WRITE_ATTEMPTS = namedParams(['step', ...ATTEMPT_PARAMS, 'fallback_id', 'fallback_step', 'fallback_due', ...EVENT_PARAMS]);
const $ = WRITE_ATTEMPTS.$;

/**
 * A job's attempts (`ON CONFLICT … DO NOTHING`: the guard against a second run), the next step of
 * recipients refused before leaving, and the events of the attempts written, in one statement.
 */
const WRITE_ATTEMPTS_SQL = `WITH attempts_in AS (
     INSERT INTO attempts (recipient_id, step, channel, family, state, result_info, phone, sender, carrier, parts, encoding,
                             country, operator, price_czk, price_eur, charged, charged_currency, payer_kind, payer_id, handed_at, body)
       SELECT u.recipient_id, ${$.step}, u.channel, u.family, u.state, u.result_info, u.phone, u.sender, u.carrier, u.parts, u.encoding,
              u.country, 0, u.price_czk, u.price_eur, u.charged, u.charged_currency, u.payer_kind, u.payer_id,
              CASE WHEN u.state = 'sending' THEN NULL ELSE now() END, u.body
         FROM ${arrayRows({
           recipient_id: `${$.recipient_id}::bigint[]`, channel: `${$.channel}::text[]`, family: `${$.family}::text[]`,
           state: `${$.state}::text[]`, result_info: `${$.result_info}::text[]`, phone: `${$.phone}::text[]`, sender: `${$.sender}::text[]`,
           carrier: `${$.carrier}::text[]`, parts: `${$.parts}::int[]`, encoding: `${$.encoding}::text[]`, country: `${$.country}::int[]`,
           price_czk: `${$.price_czk}::numeric[]`, price_eur: `${$.price_eur}::numeric[]`, charged: `${$.charged}::numeric[]`,
           charged_currency: `${$.charged_currency}::text[]`, payer_kind: `${$.payer_kind}::text[]`, payer_id: `${$.payer_id}::bigint[]`,
           body: `${$.body}::text[]`,
         })} AS u
     ON CONFLICT (recipient_id, step) DO NOTHING
     RETURNING id, recipient_id),
     recipients_on AS (
     UPDATE recipients r SET step = u.step, due_at = u.due_at
       FROM ${arrayRows({ id: `${$.fallback_id}::bigint[]`, step: `${$.fallback_step}::smallint[]`, due_at: `${$.fallback_due}::timestamptz[]` })} AS u
      WHERE r.id = u.id AND r.id IN (SELECT recipient_id FROM attempts_in)),
     ${eventsCtes($, 'attempts_in')}
     SELECT id, recipient_id FROM attempts_in`;

/**
 * The attempts' columns, built in one loop and not a `.map` per column (docs/architecture.md,
 * "Hot loops").
 */
function attemptColumns(deps: EngineDeps, planned: Planned[]): Record<AttemptParam, string> {
  const recipientId: number[] = [], count: number[] = [], country: number[] = [], priceCzk: number[] = [], priceEur: number[] = [];
  const charged: number[] = [], payerId: Array<number | null> = [];
  const channel: string[] = [], family: string[] = [], state: string[] = [], resultInfo: string[] = [], phone: string[] = [];
  const sender: string[] = [], carrier: string[] = [], encoding: Array<string | null> = [], currency: Array<string | null> = [];
  const payerKind: Array<string | null> = [], body: Array<string | null> = [];
  for (const p of planned) {
    const msg = p.part.msg;
    const charge = p.reject ? undefined : p.charge;
    recipientId.push(p.recipient.id);
    channel.push(p.channel);
    family.push(familyOf(p.channel));
    state.push(p.reject ? 'rejected' : 'sending');
    resultInfo.push(p.reject?.info ?? 'Sending');
    phone.push(p.recipient.phone ?? '');
    sender.push(p.sender);
    carrier.push(p.carrier?.name ?? 'none');
    count.push(p.count);
    encoding.push(p.attempt.channel === 'sms' && p.recipient.phone ? p.attempt.encoding : null);
    country.push(p.country);
    priceCzk.push(p.priceCzk);
    priceEur.push(p.priceEur);
    charged.push(charge ? fromUnits(charge.units) : 0);
    currency.push(p.reject ? null : msg.key_currency);
    payerKind.push(charge?.payer.kind ?? null);
    payerId.push(charge?.payer.id ?? null);
    // The text is stored only when it differs from the message's (a resolved or masked text).
    const kept = deps.hooks.maskText ? deps.hooks.maskText(msg.source, p.attempt.text) : p.attempt.text;
    body.push(kept === msg.body ? null : kept);
  }
  return {
    recipient_id: numberArray(recipientId), channel: textArray(channel), family: textArray(family), state: textArray(state),
    result_info: textArray(resultInfo), phone: textArray(phone), sender: textArray(sender), carrier: textArray(carrier),
    parts: numberArray(count), encoding: textArray(encoding), country: numberArray(country), price_czk: numberArray(priceCzk),
    price_eur: numberArray(priceEur), charged: numberArray(charged), charged_currency: textArray(currency),
    payer_kind: textArray(payerKind), payer_id: numberArray(payerId), body: textArray(body),
  };
}

function rejectedParts(written: Planned[]): Part[] {
  const parts: Part[] = [];
  for (const p of written) {
    if (p.reject) parts.push(p.part);
  }
  return parts;
}

/**
 * What the attempt's row holds that never changes, as Postgres returns it (attempt-facts.ts): the
 * values written above, with the prices rounded as numeric(18,4) stores them (a price per part
 * times the parts may carry a binary remainder; a charge is whole units already). The recipient's
 * account and key are its message's.
 */
function attemptFactsOf(p: Planned, step: number): AttemptFacts {
  const { msg } = p.part;
  return {
    id: p.attempt.attemptId, recipient_id: p.recipient.id, step, channel: p.channel, phone: p.recipient.phone ?? '',
    sender: p.sender, parts: p.count, country: p.country, operator: 0, price_czk: round4(p.priceCzk), price_eur: round4(p.priceEur),
    charged: p.charge ? fromUnits(p.charge.units) : 0, payer_kind: p.charge?.payer.kind ?? null, payer_id: p.charge?.payer.id ?? null,
    charged_currency: msg.key_currency, public_id: p.recipient.public_id, account_id: msg.account_id, key_id: msg.key_id,
    message_id: msg.id,
  };
}

type SmsPlanner = (text: string, type: 'utf' | 'sms') => SmsPlan;

/**
 * A planner for one dispatch run. The recipients of one message come one after another with the
 * same text: its GSM-7 scan and split are done once for them, not per recipient (plans are shared
 * read-only). Kept per run, so no text (a verification code) outlives the run in a cache.
 */
function smsPlanner(): SmsPlanner {
  let last: { text: string; type: 'utf' | 'sms'; plan: SmsPlan } | null = null;
  return (text, type) => {
    if (last === null || last.text !== text || last.type !== type) {
      last = { text, type, plan: planSms(text, type) };
    }
    return last.plan;
  };
}

/**
 * What one recipient's attempt at this step will be: its channel module plans the attempt (text,
 * parts, the channel's own fields); then its carrier and price.
 */
function planAttempt(
  deps: EngineDeps, part: Part, r: RecipientRow, resolvedText: string | undefined,
  prices: Awaited<ReturnType<typeof currentPrices>>, planSmsOf: SmsPlanner,
): Planned {
  const { msg, step, ttlMinutes } = part;
  const channel = step.channel;
  const phone = r.phone ?? '';
  const input = {
    base: { attemptId: 0, recipientPublicId: r.public_id, accountId: msg.account_id, to: phone, sender: '', text: '', ttlMinutes },
    text: resolvedText ?? stepBody(step) ?? msg.body ?? undefined,
    defaultSmsSender: msg.default_sender ?? deps.config.defaultSender,
    planSms: planSmsOf,
  };
  input.base.sender = step.config.sender ?? channelModule(channel).defaultSender(step.config, input);
  const planned = planChannelAttempt(step, input);
  const { attempt } = planned;
  // An invalid number is refused before anything is planned for it: one segment, no price.
  const count = phone ? planned.count : 1;
  const route = phone ? deps.carriers.route(channel, phone, msg.account_id, attempt.sender) : null;
  const price = phone ? findPrice(prices, channel, phone) : null;
  return {
    part, recipient: r, channel, carrier: route?.carrier ?? null, attempt, sender: attemptSender(attempt.sender), count,
    priceCzk: (price?.price_czk ?? 0) * count, priceEur: (price?.price_eur ?? 0) * count, country: phone ? mccOfE164(phone) : 0,
    reject: !route ? { info: '[302] Invalid phone number', fallback: false }
      : !route.carrier ? { info: route.info, fallback: true }
        : !price ? { info: '[303] No route', fallback: true } : undefined,
  };
}

/** The payer of a message's attempts (domain/payer.ts). */
function payerOfMessage(msg: MessageRow): Payer {
  return payerOf({ id: msg.key_id, accountId: msg.account_id, isPrimary: msg.key_primary, shared: msg.key_shared, currency: msg.key_currency });
}

/** An attempt's charge in units, in its key's currency. */
const chargeUnits = (p: Planned): number => toUnits(p.part.msg.key_currency === 'CZK' ? p.priceCzk : p.priceEur);

/** Optimistic: every payable attempt is charged; the conditional debits of `debitsOf` check the balances. */
function assignCharges(planned: Planned[]): void {
  for (const p of planned) {
    if (!p.reject) {
      p.charge = { units: chargeUnits(p), payer: payerOfMessage(p.part.msg) };
    }
  }
}

/**
 * Allocating: lock each payer's balance row (in a fixed order), charge attempts in order while the
 * balance lasts and reject the rest `[307] Insufficient credit`; a balance never goes below zero.
 */
async function allocateCharges(tx: Tx, planned: Planned[]): Promise<void> {
  const byPayer = new Map<string, { payer: Payer; list: Planned[] }>();
  for (const p of planned) {
    if (p.reject) {
      continue;
    }
    const payer = payerOfMessage(p.part.msg);
    const key = payerKey(payer);
    const entry = byPayer.get(key) ?? { payer, list: [] };
    entry.list.push(p);
    byPayer.set(key, entry);
  }
  for (const { payer, list } of inPayerOrder(byPayer)) {
    const { rows } = payer.kind === 'key'
      ? await tx.query<{ balance: number }>('SELECT balance FROM api_keys WHERE id = $1 FOR UPDATE', [payer.id])
      : await tx.query<{ balance: number }>(`SELECT ${payer.currency === 'CZK' ? 'credit_czk' : 'credit_eur'} AS balance FROM accounts WHERE id = $1 FOR UPDATE`, [payer.id]);
    let available = toUnits(rows[0]?.balance ?? 0);
    for (const p of list) {
      const units = chargeUnits(p);
      if (units > available) {
        p.reject = { info: '[307] Insufficient credit', fallback: false };
        continue;
      }
      available -= units;
      p.charge = { units, payer };
    }
  }
}

/** What the written attempts cost each payer, in the payers' key order (`PayerSums`: concurrent transactions lock balances alike). */
function debitsOf(written: Planned[]): PayerSum[] {
  const sums = new PayerSums();
  for (const p of written) {
    if (p.reject || !p.charge) {
      continue;
    }
    sums.add(p.charge.payer, p.charge.units);
  }
  const out: PayerSum[] = [];
  for (const d of sums.inOrder()) {
    if (d.units > 0) out.push(d);
  }
  return out;
}

/** A carrier that does not settle on send and wants to hear of recorded hand-overs (`Carrier.handedOver`). */
function keepsRehandGuard(carrier: Carrier): boolean {
  return !carrier.settlesOnSend && carrier.handedOver !== undefined;
}

/**
 * The hand-over of these attempts is committed: their carriers (those that do not settle on send)
 * may let what guards a re-hand go (`Carrier.handedOver`).
 */
async function forgetRehandGuards(handed: ReadonlyArray<{ carrier: Carrier | null; attemptId: number }>, byEarlierRun = false): Promise<void> {
  const byCarrier = new Map<Carrier, number[]>();
  for (const h of handed) {
    if (h.carrier && keepsRehandGuard(h.carrier)) pushTo(byCarrier, h.carrier, h.attemptId);
  }
  await Promise.all([...byCarrier.entries()].map(([carrier, ids]) => carrier.handedOver!(ids, { byEarlierRun })));
}

/**
 * What an earlier run of the job may have died before, for attempts it handed over (after this
 * run committed): their ttl timers (one that exists is kept; deadlines to the next whole second),
 * in one command, and their carriers' `handedOver`.
 */
async function afterHandedBefore(deps: EngineDeps, handedBefore: HandedBefore[]): Promise<void> {
  if (handedBefore.length === 0) return;
  const timers: Array<[number, number]> = [];
  for (const h of handedBefore) {
    if (h.due !== null) timers.push([h.attemptId, Math.ceil(h.due / 1000) * 1000]);
  }
  await deps.ttlTimers.setEachKeep(timers);
  await forgetRehandGuards(handedBefore, true);
}

/** What lets the recovery sweep find a job's work until it is handed over (see `handOver`). */
interface SweepMarks {
  step: number;
  /** Messages of a step-0 job whose `dispatch_pending` is set. */
  flaggedMessages: string[];
  /** Recipients at the job's step whose `due_at` is set (scheduled, deferred, later steps). */
  dueRecipients: number[];
}

/**
 * Give attempts to their carriers, record the hand-over and set the ttl timers. Recording it
 * clears the marks the recovery sweep would find this work by: only now, so that a crash anywhere
 * before leaves the work findable (the job that runs again re-hands what never reached a carrier).
 */
async function handOver(deps: EngineDeps, toHand: ToHand[], marks: SweepMarks): Promise<void> {
  const byCarrier = new Map<Carrier, OutboundAttempt[]>();
  for (const { carrier, attempt, part } of toHand) {
    // The attempt objects are this call's own: the lane's handling and its run's hold are set on them.
    if (part.msg.lane < LANE_NUMBER.promotional) attempt.priority = true;
    if (deps.config.atMostOnceLanes.includes(part.msg.lane)) attempt.atMostOnce = true;
    if (part.hold) attempt.hold = part.hold;
    pushTo(byCarrier, carrier, attempt);
  }
  // A carrier that throws leaves its attempts unhanded: the job fails and its retry re-hands them.
  await Promise.all([...byCarrier.entries()].map(([carrier, attempts]) => carrier.send(attempts)));
  // A carrier that settles on send has had every attempt's report applied by now, which records
  // its hand-over; the others' is recorded here. A recipient that a fast report already moved on to
  // its next step keeps that step's due_at (hence `step =`). The record returns the attempts' states
  // as committed by then: an attempt its carrier settled meanwhile (not a Viber user, a receipt
  // faster than this record, applied by any process) gets no ttl timer below.
  const unsettled: number[] = [];
  for (const t of toHand) {
    if (!t.carrier.settlesOnSend) unsettled.push(t.attempt.attemptId);
  }
  const stateNow = new Map<number, AttemptState>();
  if (unsettled.length > 0 || marks.flaggedMessages.length > 0 || marks.dueRecipients.length > 0) {
    const { rows } = await deps.db.query<{ id: number; state: AttemptState }>(prepared(
      `WITH handed AS (UPDATE attempts SET handed_at = COALESCE(handed_at, now()) WHERE id = ANY($1) RETURNING id, state),
            started AS (UPDATE recipients SET due_at = NULL WHERE id = ANY($3) AND step = $4 AND due_at IS NOT NULL),
            flagged AS (UPDATE messages SET dispatch_pending = false WHERE id = ANY($2) AND dispatch_pending)
       SELECT id, state FROM handed`,
      [numberArray(unsettled), textArray(marks.flaggedMessages), numberArray(marks.dueRecipients), marks.step]),
    );
    for (const row of rows) stateNow.set(row.id, row.state);
    // No object per attempt on the SMPP path (its carrier settles on send and keeps no such guard).
    const guarded = toHand.filter((t) => keepsRehandGuard(t.carrier));
    if (guarded.length > 0) await forgetRehandGuards(guarded.map((t) => ({ carrier: t.carrier, attemptId: t.attempt.attemptId })));
  }
  if (toHand.length === 0) {
    return;
  }
  if (deps.hooks.afterHanded) {
    const bySource = new Map<string, OutboundAttempt[]>();
    for (const t of toHand) {
      pushTo(bySource, t.part.msg.source, t.attempt);
    }
    for (const [source, attempts] of bySource) {
      await deps.hooks.afterHanded(source, attempts);
    }
  }
  // A step's ttl timer only matters while its success condition can still be missed (needsTtlTimer).
  const now = Date.now();
  const byTtl = new Map<number, number[]>();
  for (const t of toHand) {
    const channel = t.part.step.channel;
    const state = stateNow.get(t.attempt.attemptId);
    if (needsTtlTimer(channel, t.carrier.settlesOnSend === true) && (state === undefined || ttlExpiryApplies(channel, state))) {
      pushTo(byTtl, t.part.ttlMinutes * 60_000, t.attempt.attemptId);
    }
  }
  for (const [ms, ids] of byTtl) {
    // `keep`: a re-handed attempt keeps its first deadline, as its `handed_at` keeps its first hand-over.
    await deps.ttlTimers.set(ids, now + ms, 'keep');
  }
}
