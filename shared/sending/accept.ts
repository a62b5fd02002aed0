/**
 * Accepting messages: the hottest path of the service. Shape, limits and auth are checked here;
 * number validity, routing, price and credit are settled later by dispatch (D2 two-phase
 * acceptance). Accepted work is durable before the caller hears 200: one transaction writes
 * every message object and recipient of the call (one statement per table), then the dispatch
 * jobs are added, one command per queue. If Redis fails after the commit the recovery sweep
 * enqueues them.
 */
import { randomUUID } from 'node:crypto';
import type { Db, Queryable, Tx } from '../db/pool.js';
import { prepared, withTx } from '../db/pool.js';
import { arrayRows, boolArray, numberArray, textArray, timestampArray } from '../db/arrays.js';
import { Semaphore } from '../semaphore.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { Queues, laneOfTag, LANE_NUMBER, isQueueConnected } from '../queues.js';
import { stepOf } from '../channels/index.js';
import { addDispatchJobs, callJob, messageJob, type QueuedDispatchJob } from '../engine/dispatch-jobs.js';
import { messageSchema, messageSchemaWithRecipients, MAX_RECIPIENTS, stepMissingBody, unstorableText, effectiveFlow, type MessageInput } from './message-schema.js';
import { describeJoiError, mostTellingError } from '../validation.js';
import { normalizePhone } from '../phone/normalize.js';
import { resolveSendAt, validateDeliveryWindow, nextSendInstant } from '../schedule/window.js';
import { checkCallbackUrl } from '../net/ssrf.js';
import { badRequest, conflict } from '../errors.js';
import { StorageUnavailableError } from '../storage-unavailable.js';
import { newId, singleRecipientId } from './ids.js';
import {
  CALL_KEY, OBJECT_KEY, callClaimCte, claimKeys, isClaimed, objectFingerprint, releaseKey, setResponse, storedKeys, type CallIdempotency, type Claim,
} from './idempotency.js';
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
  /** The call's `Idempotency-Key` (idempotency.ts): a repeated call is answered as the first was. */
  idempotency?: CallIdempotency;
}

export interface AcceptResult {
  requestId: string;
  accepted: Array<{ key: string; messageId: string }>;
  rejected: Array<{ key: string; message: string }>;
  /** Per accepted object: its recipients' public ids and stored numbers (the XML and verify APIs need them). */
  recipients: Array<{ messageId: string; publicIds: string[]; phones: Array<string | null>; recipientIds: number[] }>;
  /** The stored answer of an earlier call with the same `Idempotency-Key`: nothing was accepted now. */
  replayed?: boolean;
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
  const options = { abortEarly: true, convert: false };
  const { value, error } = schema.validate(raw, options);
  if (error) {
    return describeJoiError(mostTellingError(schema, raw, options, error), 'message');
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
  const objectKeys = new Map<string, number>();
  inputs.forEach((raw, index) => {
    const p = prepareMessage(raw, key, deps.config, now, opts.maxRecipients);
    if (typeof p === 'string') {
      if (opts.mode === 'single' || opts.atomic) {
        throw badRequest(opts.mode === 'single' ? p : `[${index}] ${p}`, 'VALIDATION', { index });
      }
      result.rejected.push({ key: String(index), message: p });
    } else if (p.input.idempotency_key !== undefined && objectKeys.has(p.input.idempotency_key)) {
      // One key names one object: the second is refused, not sent twice nor answered as the first.
      result.rejected.push({ key: String(index), message: `idempotency_key: is also the key of message object ${objectKeys.get(p.input.idempotency_key)} of this call` });
    } else {
      p.key = String(index);
      checked.push(p);
      if (p.input.idempotency_key !== undefined) objectKeys.set(p.input.idempotency_key, index);
    }
  });
  if (checked.length === 0) {
    // Nothing to accept, so nothing to store with a call key; but a key already stored for another
    // request is still a 409, and one stored for this same request answers as it did.
    if (opts.idempotency && (await storedKeys(deps.db, key.id, CALL_KEY, [opts.idempotency.key])).has(opts.idempotency.key)) {
      return replayCall(deps.db, key, opts.idempotency);
    }
    return result;
  }

  // Ids first: an idempotent call's answer is known, and stored with its key, before it is written.
  const objects: AcceptedObject[] = [];
  for (const p of checked) {
    const messageId = newId();
    const publicIds: string[] = [];
    for (let i = 0; i < p.input.to.length; i++) {
      publicIds.push(opts.mode === 'single' ? singleRecipientId(messageId, i) : `${messageId}-${i}`);
    }
    objects.push({ p, entry: { messageId, publicIds, phones: p.phones, recipientIds: [] } });
  }
  result.accepted = acceptedEntries(opts.mode, objects);

  const context: WriteContext = { deps, key, opts, now, result };
  result.recipients = objects.map((o) => o.entry);
  const { beforeCommit, idempotency: callKey } = opts;
  let written = objects;
  const write = async (): Promise<void> => {
    if (objectKeys.size > 0 || (callKey && beforeCommit)) {
      // Object keys may change the answer after their claim: claims, answer and writes in one transaction.
      await withTx(deps.db, async (tx) => {
        written = await claimAndResolve(tx, context, objects, inputs);
        result.recipients = written.map((o) => o.entry);
        await insertObjects(tx, context, written);
        await beforeCommit?.(tx, result);
      });
    } else if (beforeCommit) {
      await withTx(deps.db, async (tx) => {
        await insertObjects(tx, context, objects);
        await beforeCommit(tx, result);
      });
    } else if (!await insertObjects(deps.db, context, objects, callKey && { kind: CALL_KEY, ...callKey, response: storedCall(result) })) {
      // Messages and recipients in one statement, atomic on its own (no BEGIN/COMMIT round trips);
      // a call key alone is claimed in it too, and when it is taken nothing was written.
      throw new CallKeyTaken(callKey!);
    }
  };
  // Bulk writes take turns (a few at a time per process), so a burst of large calls cannot fill
  // Postgres with inserts while a priority message waits to be accepted: priority calls skip the gate.
  const priorityOnly = checked.every((p) => laneOfTag(p.input.tag ?? 'promotional') === 'priority');
  try {
    await (priorityOnly ? write() : bulkGateOf(deps).run(write));
  } catch (err) {
    if (err instanceof CallKeyTaken) {
      return replayCall(deps.db, key, err.idempotency);
    }
    throw err;
  }

  // Objects due now share one job per queue (one dispatch transaction for the whole call);
  // scheduled ones get their own delayed job.
  const jobs: QueuedDispatchJob[] = [];
  const dueNow = new Map<string, QueuedDispatchJob>();
  written.forEach(({ p, entry }) => {
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
    const job = callJob(target, result.requestId, item);
    const combined = dueNow.get(job.queue);
    if (combined) {
      combined.data.messages.push(item);
      return;
    }
    dueNow.set(job.queue, job);
    jobs.push(job);
  });
  try {
    if (!(await queuesConnected(deps.queues, jobs))) {
      throw new StorageUnavailableError('redis', 'not connected');
    }
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

/** Whether the queues a call's jobs go to are connected (`isQueueConnected`). */
async function queuesConnected(queues: Queues, jobs: QueuedDispatchJob[]): Promise<boolean> {
  for (const name of new Set(jobs.map((j) => j.queue))) {
    if (!(await isQueueConnected(queues.dispatchByName(name)))) {
      return false;
    }
  }
  return true;
}

/** A checked message object with its ids (and, once written, its recipients' row ids). */
export interface AcceptedObject {
  p: Prepared;
  entry: AcceptResult['recipients'][number];
}

interface WriteContext {
  deps: AcceptDeps;
  key: ApiKeyRecord;
  opts: AcceptOptions;
  now: Date;
  result: AcceptResult;
}

/** The `accepted` entries of objects: one per object (batch), or one per recipient with its own id (single). */
function acceptedEntries(mode: AcceptMode, objects: readonly AcceptedObject[]): AcceptResult['accepted'] {
  const out: AcceptResult['accepted'] = [];
  for (const { p, entry } of objects) {
    if (mode === 'single') {
      entry.publicIds.forEach((id, i) => out.push({ key: String(i), messageId: id }));
    } else {
      out.push({ key: p.key, messageId: entry.messageId });
    }
  }
  return out;
}

/**
 * Messages and recipients of the objects in one statement (atomic on its own); fills each
 * object's recipient row ids. With `claim` (a call's key), the statement claims it first and
 * writes nothing when it is taken: returns whether it wrote. Exported for the measurement of
 * one Postgres's limits (scripts/bench/pg-limits.ts), which times this statement alone.
 */
export async function insertObjects(
  db: Queryable, ctx: Pick<WriteContext, 'key' | 'opts' | 'now' | 'result'>, objects: readonly AcceptedObject[], claim?: Claim,
): Promise<boolean> {
  if (objects.length === 0) {
    return true;
  }
  const { opts, now, result, key } = ctx;
  // Columns for one multi-row insert per table.
  const m = { id: [] as string[], body: [] as Array<string | null>, flow: [] as string[], callback: [] as Array<string | null>,
    tag: [] as string[], lane: [] as number[], params: [] as Array<string | null>, payload: [] as Array<string | null>,
    sendAt: [] as Array<Date | null>, window: [] as Array<string | null>, dispatchPending: [] as boolean[] };
  const r = { publicId: [] as string[], messageId: [] as string[], idx: [] as number[], tag: [] as string[],
    raw: [] as string[], phone: [] as Array<string | null>, state: [] as string[], dueAt: [] as Array<Date | null> };
  for (const { p, entry } of objects) {
    const { messageId, publicIds } = entry;
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
    p.input.to.forEach((recipient, i) => {
      r.publicId.push(publicIds[i]!);
      r.messageId.push(messageId);
      r.idx.push(i);
      r.tag.push(tag);
      r.raw.push(recipient.phone_number);
      r.phone.push(p.phones[i] ?? null);
      r.state.push(p.phones[i] === TEST_NUMBER ? 'test' : 'queued');
      r.dueAt.push(startsNow ? null : p.dueAt);
    });
  }
  const { rows } = await db.query<{ id: number; public_id: string }>(prepared(
    claim ? ACCEPT_CLAIMING_SQL : ACCEPT_SQL,
    [result.requestId, key.accountId, key.id, opts.source, textArray(m.id), textArray(m.body), textArray(m.flow),
      textArray(m.callback), textArray(m.tag), numberArray(m.lane), textArray(m.params), textArray(m.payload),
      timestampArray(m.sendAt), textArray(m.window), textArray(r.publicId), textArray(r.messageId), numberArray(r.idx),
      textArray(r.tag), textArray(r.raw), textArray(r.phone), textArray(r.state), timestampArray(r.dueAt),
      boolArray(m.dispatchPending), ...(claim ? [claim.key, claim.fingerprint, JSON.stringify(claim.response)] : [])]),
  );
  if (rows.length === 0) {
    return false; // the claim found its key taken (every object has a recipient)
  }
  const ids = new Map(rows.map((row) => [row.public_id, row.id]));
  for (const { entry } of objects) {
    entry.recipientIds = entry.publicIds.map((id) => ids.get(id)!);
  }
  return true;
}

const MESSAGE_ROWS = arrayRows({
  id: '$5::text[]', body: '$6::text[]', flow: '$7::jsonb[]', callback: '$8::text[]', tag: '$9::text[]', lane: '$10::smallint[]',
  params: '$11::jsonb[]', payload: '$12::json[]', send_at: '$13::timestamptz[]', delivery_time: '$14::jsonb[]', dispatch_pending: '$23::boolean[]',
});
const RECIPIENT_ROWS = arrayRows({
  public_id: '$15::text[]', message_id: '$16::text[]', idx: '$17::smallint[]', tag: '$18::text[]', raw_phone: '$19::text[]', phone: '$20::text[]',
  state: '$21::text[]', due_at: '$22::timestamptz[]',
});

/**
 * Messages and recipients in one statement. `claiming`: a call key's claim comes first (the
 * `claimed` CTE, idempotency.ts) and both inserts write only if it claimed the key.
 */
function acceptSql(claiming: boolean): string {
  const only = claiming ? '\n       WHERE EXISTS (SELECT 1 FROM claimed)' : '';
  return `WITH ${claiming ? `${callClaimCte('$3', '$24', '$25', '$26')},\n     ` : ''}messages_in AS (
       INSERT INTO messages (id, request_id, account_id, key_id, body, flow, callback, tag, lane, params, payload, send_at, delivery_time,
                             source, dispatch_pending)
       SELECT u.id, $1, $2, $3, u.body, u.flow, u.callback, u.tag, u.lane, u.params, u.payload, u.send_at, u.delivery_time, $4,
              u.dispatch_pending
         FROM ${MESSAGE_ROWS} AS u${only})
     INSERT INTO recipients (public_id, message_id, idx, account_id, key_id, tag, raw_phone, phone, state, due_at)
     SELECT u.public_id, u.message_id, u.idx, $2, $3, u.tag, u.raw_phone, u.phone, u.state,
            CASE WHEN u.state = 'queued' THEN u.due_at END
       FROM ${RECIPIENT_ROWS} AS u${only}
     RETURNING id, public_id`;
}
const ACCEPT_SQL = acceptSql(false);
const ACCEPT_CLAIMING_SQL = acceptSql(true);



/** The call's `Idempotency-Key` was used within 24 hours: the transaction is rolled back and the stored answer given. */
class CallKeyTaken extends Error {
  constructor(readonly idempotency: CallIdempotency) {
    super('Idempotency-Key taken');
  }
}

/** What a call's key stores: its answer. */
interface StoredCall {
  request_id: string;
  accepted: AcceptResult['accepted'];
  rejected: AcceptResult['rejected'];
}

/** What an object's key stores: the call it was accepted in and its ids (the message's, or its recipients' in a single call). */
interface StoredObject {
  request_id: string;
  ids: string[];
}

const storedCall = (result: AcceptResult): StoredCall => ({ request_id: result.requestId, accepted: result.accepted, rejected: result.rejected });

/**
 * Claim the call's key and the objects' keys in the accept's transaction (idempotency.ts). The call
 * key taken: `CallKeyTaken` (the caller answers from the stored row). An object key taken by the
 * same object: the object is answered with its first ids and not written again; by another object:
 * a rejected entry (409 for a single call). Returns the objects to write.
 */
async function claimAndResolve(tx: Tx, ctx: WriteContext, objects: AcceptedObject[], inputs: unknown[]): Promise<AcceptedObject[]> {
  const { key, opts, result } = ctx;
  const keyOf = new Map<AcceptedObject, { key: string; fingerprint: Buffer }>();
  const claims: Claim[] = [];
  if (opts.idempotency) {
    claims.push({ kind: CALL_KEY, key: opts.idempotency.key, fingerprint: opts.idempotency.fingerprint, response: storedCall(result) });
  }
  for (const o of objects) {
    const objectKey = o.p.input.idempotency_key;
    if (objectKey !== undefined) {
      const index = Number(o.p.key);
      const fingerprint = objectFingerprint(opts.mode, inputs[index], opts.rawPayloads?.[index]);
      keyOf.set(o, { key: objectKey, fingerprint });
      const stored: StoredObject = { request_id: result.requestId, ids: opts.mode === 'single' ? o.entry.publicIds : [o.entry.messageId] };
      claims.push({ kind: OBJECT_KEY, key: objectKey, fingerprint, response: stored });
    }
  }
  const claimed = await claimKeys(tx, key.id, claims);
  if (opts.idempotency && !isClaimed(claimed, CALL_KEY, opts.idempotency.key)) {
    throw new CallKeyTaken(opts.idempotency);
  }
  const taken = [...keyOf].filter(([, k]) => !isClaimed(claimed, OBJECT_KEY, k.key));
  if (taken.length === 0) {
    return objects;
  }
  const stored = await storedKeys(tx, key.id, OBJECT_KEY, taken.map(([, k]) => k.key));
  const replayed = new Map<AcceptedObject, StoredObject>();
  for (const [o, k] of taken) {
    const row = stored.get(k.key);
    if (row && row.fingerprint.equals(k.fingerprint)) {
      replayed.set(o, row.response as StoredObject);
    } else if (opts.mode === 'single') {
      throw conflict(`idempotency_key: "${k.key}" was used for a different message object in the last 24 hours`);
    } else {
      result.rejected.push({ key: o.p.key, message: 'idempotency_key: was used for a different message object in the last 24 hours' });
    }
  }
  // The answer: objects accepted now, and those accepted before with their first ids, in call order.
  const written: AcceptedObject[] = [];
  const accepted: AcceptResult['accepted'] = [];
  for (const o of objects) {
    const before = replayed.get(o);
    if (before) {
      if (opts.mode === 'single') {
        result.requestId = before.request_id;
        before.ids.forEach((id, i) => accepted.push({ key: String(i), messageId: id }));
      } else {
        accepted.push({ key: o.p.key, messageId: before.ids[0]! });
      }
    } else if (!taken.some(([t]) => t === o)) {
      written.push(o);
      accepted.push(...acceptedEntries(opts.mode, [o]));
    }
  }
  result.accepted = accepted;
  result.rejected.sort((a, b) => Number(a.key) - Number(b.key));
  if (opts.idempotency) {
    if (accepted.length === 0) {
      // Every object lost its key's claim: nothing was accepted, so the call's key is not kept and
      // the call can be fixed and sent again with it, as when every object failed its checks.
      await releaseKey(tx, key.id, CALL_KEY, opts.idempotency.key);
    } else {
      await setResponse(tx, key.id, CALL_KEY, opts.idempotency.key, storedCall(result));
    }
  }
  return written;
}

/** The answer stored with a call's key; 409 when the key was used for another request. */
async function replayCall(db: Db, key: ApiKeyRecord, idempotency: CallIdempotency): Promise<AcceptResult> {
  const row = (await storedKeys(db, key.id, CALL_KEY, [idempotency.key])).get(idempotency.key);
  if (!row || !row.fingerprint.equals(idempotency.fingerprint)) {
    throw conflict(`Idempotency-Key "${idempotency.key}" was used for a different request (another body or endpoint) in the last 24 hours`);
  }
  const call = row.response as StoredCall;
  return { requestId: call.request_id, accepted: call.accepted, rejected: call.rejected, recipients: [], replayed: true };
}
