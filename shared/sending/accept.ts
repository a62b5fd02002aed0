/**
 * Accepting messages: the hottest path of the service. Shape, limits and auth are checked here;
 * number validity, routing, price and credit are settled later by dispatch (D2 two-phase
 * acceptance). Accepted work is durable before the caller hears 200: one transaction writes
 * every message object and recipient of the call (one statement per table), then the dispatch
 * jobs are added, one command per queue. If Redis fails after the commit the recovery sweep
 * enqueues them.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Db, Queryable, Tx } from '../db/pool.js';
import { prepared, withTx } from '../db/pool.js';
import { boolArray, numberArray, textArray, timestampArray } from '../db/arrays.js';
import { Semaphore } from '../semaphore.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { Queues, laneOfTag, LANE_NUMBER } from '../queues.js';
import { stepOf } from '../channels/index.js';
import { addDispatchJobs, callJob, messageJob, type QueuedDispatchJob } from '../engine/dispatch-jobs.js';
import { messageSchema, messageSchemaWithRecipients, MAX_RECIPIENTS, stepMissingBody, unstorableText, effectiveFlow, type MessageInput } from './message-schema.js';
import { describeJoiError } from '../validation.js';
import { normalizePhone } from '../phone/normalize.js';
import { resolveSendAt, validateDeliveryWindow, nextSendInstant } from '../schedule/window.js';
import { checkCallbackUrl } from '../net/ssrf.js';
import { badRequest } from '../errors.js';
import { countAccepted } from '../metrics.js';

/** D2: accepted with ids, never sent, never charged, no webhooks. */
export const TEST_NUMBER = '420777777777';

export interface AcceptDeps {
  db: Db;
  queues: Queues;
  config: Config;
  logger: Logger;
}

export type AcceptMode = 'batch' | 'single';
export type MessageSource = 'v2' | 'v1' | 'simple' | 'xml' | 'verify';

export interface AcceptOptions {
  /** `batch`: one id per object, recipients `<id>-<index>`; `single`: every recipient its own id, any error fails the call. */
  mode: AcceptMode;
  source: MessageSource;
  now?: Date;
  /** Refuse the whole call at the first invalid object, before anything is written (XML API). */
  atomic?: boolean;
  /** Recipients allowed per message object (default 10; the XML API allows more). */
  maxRecipients?: number;
  /** Exact JSON text of each input's payload (by index), kept instead of a re-serialisation. */
  rawPayloads?: Array<string | undefined>;
  /** Extra writes that must commit together with the messages (the verification session row). */
  beforeCommit?: (tx: Tx, result: AcceptResult) => Promise<void>;
}

export interface AcceptResult {
  requestId: string;
  accepted: Array<{ key: string; messageId: string }>;
  rejected: Array<{ key: string; message: string }>;
  /** Per accepted object: its recipients' public ids and stored numbers (the XML and verify APIs need them). */
  recipients: Array<{ messageId: string; publicIds: string[]; phones: Array<string | null>; recipientIds: number[] }>;
}

interface Prepared {
  key: string;
  input: MessageInput;
  flow: ReturnType<typeof effectiveFlow>;
  sendAt: Date | null;
  dueAt: Date;
  phones: Array<string | null>;
}

/** A checked message object, or the reason it is rejected (`<field path>: <what is wrong>`). */
const wideSchemas = new Map<number, ReturnType<typeof messageSchemaWithRecipients>>();

export function prepareMessage(raw: unknown, key: ApiKeyRecord, config: Config, now: Date, maxRecipients = MAX_RECIPIENTS): Prepared | string {
  let schema = messageSchema;
  if (maxRecipients !== MAX_RECIPIENTS) {
    schema = wideSchemas.get(maxRecipients) ?? messageSchemaWithRecipients(maxRecipients);
    wideSchemas.set(maxRecipients, schema);
  }
  const { value, error } = schema.validate(raw, { abortEarly: true, convert: false });
  if (error) {
    return describeJoiError(error, 'message');
  }
  const input = value as MessageInput;
  const unstorable = unstorableText(input);
  if (unstorable !== null) {
    return unstorable;
  }
  const missing = stepMissingBody(input);
  if (missing !== null) {
    return `body: is required unless every flow channel has its own body (flow[${missing}] has none)`;
  }
  if (input.callback !== undefined) {
    const policy = checkCallbackUrl(input.callback, config.allowPrivateCallbacks);
    if (!policy.ok) {
      return `callback: ${policy.reason}`;
    }
  }
  let sendAt: Date | null = null;
  if (input.datetime !== undefined) {
    const resolved = resolveSendAt(input.datetime, now);
    if (!resolved.ok) {
      return `datetime: ${resolved.message}`;
    }
    sendAt = resolved.sendAt;
  }
  let dueAt = sendAt ?? now;
  if (input.delivery_time !== undefined) {
    const check = validateDeliveryWindow(input.delivery_time);
    if (!check.ok) {
      return `${check.field}: ${check.message}`;
    }
    dueAt = nextSendInstant(input.delivery_time, dueAt);
  }
  const phones = input.to.map((r) => normalizePhone(r.phone_number, key.accountCountry));
  return { key: '', input, flow: effectiveFlow(input), sendAt, dueAt, phones };
}

// Ids come from a pool of random bytes refilled 4 KiB at a time: a randomBytes call per id cost
// more than the bytes (the same pooling Node does for randomUUID).
const ID_BYTES = 10;
let idPool = Buffer.alloc(0);
let idOffset = 0;
function newId(): string {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(4096);
    idOffset = 0;
  }
  idOffset += ID_BYTES;
  return idPool.toString('hex', idOffset - ID_BYTES, idOffset);
}

const bulkGates = new WeakMap<Db, Semaphore>();
function bulkGateOf(deps: AcceptDeps): Semaphore {
  let gate = bulkGates.get(deps.db);
  if (!gate) {
    gate = new Semaphore(deps.config.acceptBulkConcurrency);
    bulkGates.set(deps.db, gate);
  }
  return gate;
}

export async function acceptMessages(deps: AcceptDeps, key: ApiKeyRecord, inputs: unknown[], opts: AcceptOptions): Promise<AcceptResult> {
  const now = opts.now ?? new Date();
  const result: AcceptResult = { requestId: randomUUID(), accepted: [], rejected: [], recipients: [] };
  const checked: Prepared[] = [];
  inputs.forEach((raw, index) => {
    const p = prepareMessage(raw, key, deps.config, now, opts.maxRecipients);
    if (typeof p === 'string') {
      if (opts.mode === 'single' || opts.atomic) {
        throw badRequest(opts.mode === 'single' ? p : `[${index}] ${p}`, 'VALIDATION', { index });
      }
      result.rejected.push({ key: String(index), message: p });
    } else {
      p.key = String(index);
      checked.push(p);
    }
  });
  if (checked.length === 0) {
    return result;
  }

  // Columns for one multi-row insert per table.
  const m = { id: [] as string[], body: [] as Array<string | null>, flow: [] as string[], callback: [] as Array<string | null>,
    tag: [] as string[], lane: [] as number[], params: [] as Array<string | null>, payload: [] as Array<string | null>,
    sendAt: [] as Array<Date | null>, window: [] as Array<string | null>, dispatchPending: [] as boolean[] };
  const r = { publicId: [] as string[], messageId: [] as string[], idx: [] as number[], tag: [] as string[],
    raw: [] as string[], phone: [] as Array<string | null>, state: [] as string[], dueAt: [] as Array<Date | null> };

  for (const p of checked) {
    const messageId = newId();
    const tag = p.input.tag ?? 'promotional';
    m.id.push(messageId);
    m.body.push(p.input.body ?? null);
    m.flow.push(JSON.stringify(p.flow));
    m.callback.push(p.input.callback ?? null);
    m.tag.push(tag);
    m.lane.push(LANE_NUMBER[laneOfTag(tag)]);
    m.params.push(p.input.params === undefined ? null : JSON.stringify(p.input.params));
    m.payload.push(p.input.payload === undefined ? null : (opts.rawPayloads?.[Number(p.key)] ?? JSON.stringify(p.input.payload)));
    m.sendAt.push(p.sendAt);
    m.window.push(p.input.delivery_time === undefined ? null : JSON.stringify(p.input.delivery_time));
    // Due now: the message's flag, not each recipient's due_at, lets the recovery sweep find it
    // should its dispatch job be lost, so that starting the recipients changes no indexed column
    // of theirs (their updates stay HOT). Scheduled recipients carry due_at.
    const startsNow = p.dueAt.getTime() <= now.getTime();
    m.dispatchPending.push(startsNow && p.phones.some((phone) => phone !== TEST_NUMBER));
    const publicIds: string[] = [];
    p.input.to.forEach((recipient, i) => {
      const publicId = opts.mode === 'single' ? newId() : `${messageId}-${i}`;
      publicIds.push(publicId);
      r.publicId.push(publicId);
      r.messageId.push(messageId);
      r.idx.push(i);
      r.tag.push(tag);
      r.raw.push(recipient.phone_number);
      r.phone.push(p.phones[i] ?? null);
      r.state.push(p.phones[i] === TEST_NUMBER ? 'test' : 'queued');
      r.dueAt.push(startsNow ? null : p.dueAt);
    });
    if (opts.mode === 'single') {
      publicIds.forEach((id, i) => result.accepted.push({ key: String(i), messageId: id }));
    } else {
      result.accepted.push({ key: p.key, messageId });
    }
    result.recipients.push({ messageId, publicIds, phones: p.phones, recipientIds: [] });
  }

  // Messages and recipients in one statement: atomic on its own, so a plain call needs no
  // transaction round trips (BEGIN, COMMIT) at all; a caller with work of its own (verification)
  // gets it inside a transaction.
  const insert = async (db: Queryable) => {
    const { rows } = await db.query<{ id: number; public_id: string }>(prepared(
      `WITH messages_in AS (
         INSERT INTO messages (id, request_id, account_id, key_id, body, flow, callback, tag, lane, params, payload, send_at, delivery_time,
                               source, dispatch_pending)
         SELECT u.id, $1, $2, $3, u.body, u.flow, u.callback, u.tag, u.lane, u.params, u.payload, u.send_at, u.delivery_time, $4,
                u.dispatch_pending
           FROM unnest($5::text[], $6::text[], $7::jsonb[], $8::text[], $9::text[], $10::smallint[], $11::jsonb[], $12::json[],
                       $13::timestamptz[], $14::jsonb[], $23::boolean[])
             AS u(id, body, flow, callback, tag, lane, params, payload, send_at, delivery_time, dispatch_pending))
       INSERT INTO recipients (public_id, message_id, idx, account_id, key_id, tag, raw_phone, phone, state, due_at)
       SELECT u.public_id, u.message_id, u.idx, $2, $3, u.tag, u.raw_phone, u.phone, u.state,
              CASE WHEN u.state = 'queued' THEN u.due_at END
         FROM unnest($15::text[], $16::text[], $17::smallint[], $18::text[], $19::text[], $20::text[], $21::text[], $22::timestamptz[])
           AS u(public_id, message_id, idx, tag, raw_phone, phone, state, due_at)
       RETURNING id, public_id`,
      [result.requestId, key.accountId, key.id, opts.source, textArray(m.id), textArray(m.body), textArray(m.flow),
        textArray(m.callback), textArray(m.tag), numberArray(m.lane), textArray(m.params), textArray(m.payload),
        timestampArray(m.sendAt), textArray(m.window), textArray(r.publicId), textArray(r.messageId), numberArray(r.idx),
        textArray(r.tag), textArray(r.raw), textArray(r.phone), textArray(r.state), timestampArray(r.dueAt),
        boolArray(m.dispatchPending)]),
    );
    const ids = new Map(rows.map((row) => [row.public_id, row.id]));
    for (const entry of result.recipients) {
      entry.recipientIds = entry.publicIds.map((id) => ids.get(id)!);
    }
  };
  const beforeCommit = opts.beforeCommit;
  const write = beforeCommit
    ? () => withTx(deps.db, async (tx) => {
      await insert(tx);
      await beforeCommit(tx, result);
    })
    : () => insert(deps.db);
  // Bulk writes take turns (a few at a time per process), so a burst of large calls cannot fill
  // Postgres with inserts while a priority message waits to be accepted: priority calls skip the gate.
  const priorityOnly = checked.every((p) => laneOfTag(p.input.tag ?? 'promotional') === 'priority');
  await (priorityOnly ? write() : bulkGateOf(deps).run(write));

  // Objects due now share one job per queue (one dispatch transaction for the whole call);
  // scheduled ones get their own delayed job.
  const jobs: QueuedDispatchJob[] = [];
  const dueNow = new Map<string, QueuedDispatchJob>();
  checked.forEach((p, i) => {
    const entry = result.recipients[i]!;
    const live = entry.recipientIds.filter((_, j) => entry.phones[j] !== TEST_NUMBER);
    if (live.length === 0) {
      return;
    }
    const target = { channel: stepOf(p.flow[0]!).channel, lane: laneOfTag(p.input.tag ?? 'promotional') };
    const delay = Math.max(0, p.dueAt.getTime() - now.getTime());
    if (delay > 0) {
      jobs.push(messageJob(target, entry.messageId, 0, live, delay));
      return;
    }
    const item = { messageId: entry.messageId, recipientIds: live };
    const job = callJob(target, item);
    const combined = dueNow.get(job.queue);
    if (combined) {
      combined.data.messages.push(item);
      return;
    }
    dueNow.set(job.queue, job);
    jobs.push(job);
  });
  try {
    await addDispatchJobs(deps.queues, jobs);
  } catch (err) {
    // Committed in Postgres: the recovery sweep will enqueue these; the caller's work is safe.
    deps.logger.error({ err: (err as Error).message, requestId: result.requestId }, 'enqueue after accept failed; left to the recovery sweep');
  }
  let recipients = 0;
  for (const entry of result.recipients) recipients += entry.publicIds.length;
  countAccepted(opts.source, recipients);
  return result;
}
