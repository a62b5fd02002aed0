/**
 * Dispatch jobs in one place: which queue a step goes to and under which id, for acceptance, the
 * engine (next flow steps, deferred messages) and the recovery sweep. Ids are deterministic, so
 * adding a job that exists already is a no-op:
 *
 * - `c.<request id>.s0`: the objects of one call that are due now, together (one dispatch
 *   transaction for the whole call); the recovery sweep re-adds a lost one under the same id, so it
 *   never runs beside a job of the same call still waiting in a backlog;
 * - `m.<message id>.s<step>`: the recipients of one message at a step (scheduled, deferred);
 * - `r.<recipient id>.s<step>`: one recipient's later flow step.
 */
import type { JobsOptions, Queue } from 'bullmq';
import { familyOf, type Channel } from '../channels/index.js';
import { DISPATCH_JOB_OPTIONS, LANE_OF_NUMBER, dispatchQueueName, type DispatchJob, type Lane, type Queues } from '../queues.js';

/** Where a step's job goes: the channel's pool, in the message's lane (a lane number as stored, or its name). */
export interface DispatchTarget {
  channel: Channel;
  lane: Lane | number;
}

export interface QueuedDispatchJob {
  queue: string;
  name: 'dispatch';
  data: DispatchJob;
  opts: JobsOptions;
}

export function dispatchQueueOf(target: DispatchTarget): string {
  const lane = typeof target.lane === 'number' ? (LANE_OF_NUMBER[target.lane] ?? 'promotional') : target.lane;
  return dispatchQueueName(familyOf(target.channel), lane);
}

function job(target: DispatchTarget, data: DispatchJob, jobId: string, delayMs: number): QueuedDispatchJob {
  const opts: JobsOptions = { ...DISPATCH_JOB_OPTIONS, jobId };
  if (delayMs > 0) opts.delay = delayMs;
  return { queue: dispatchQueueOf(target), name: 'dispatch', data, opts };
}

export const messageJobId = (messageId: string, step: number): string => `m.${messageId}.s${step}`;
export const recipientJobId = (recipientId: number, step: number): string => `r.${recipientId}.s${step}`;

export const callJobId = (requestId: string): string => `c.${requestId}.s0`;
export const isCallJobId = (jobId: string | undefined): boolean => jobId?.startsWith('c.') === true;

/** The first step of a call's objects that are due now; more objects may be added to `data.messages`. */
export function callJob(target: DispatchTarget, requestId: string, first: { messageId: string; recipientIds: number[] }): QueuedDispatchJob {
  return job(target, { step: 0, messages: [first] }, callJobId(requestId), 0);
}

/** One message's recipients at `step`, now or after `delayMs`. */
export function messageJob(target: DispatchTarget, messageId: string, step: number, recipientIds: number[], delayMs = 0): QueuedDispatchJob {
  return job(target, { step, messages: [{ messageId, recipientIds }] }, messageJobId(messageId, step), delayMs);
}

/** One recipient's later flow step. */
export function recipientJob(target: DispatchTarget, messageId: string, step: number, recipientId: number): QueuedDispatchJob {
  return job(target, { step, messages: [{ messageId, recipientIds: [recipientId] }] }, recipientJobId(recipientId, step), 0);
}

/**
 * Adds jobs, one command per queue. A lone job goes with `add`: BullMQ's addBulk runs even one job
 * through an ioredis pipeline, whose constructor copies every Lua command onto it.
 */
export async function addDispatchJobs(queues: Queues, jobs: QueuedDispatchJob[], opts: { replaceFailed?: boolean } = {}): Promise<{ replaced: number }> {
  const byQueue = new Map<string, QueuedDispatchJob[]>();
  for (const j of jobs) {
    const list = byQueue.get(j.queue);
    if (list) list.push(j);
    else byQueue.set(j.queue, [j]);
  }
  let replaced = 0;
  await Promise.all([...byQueue].map(async ([name, list]) => {
    const queue: Queue<DispatchJob> = queues.dispatchByName(name);
    if (opts.replaceFailed) replaced += await removeFailed(queue, list);
    const only = list.length === 1 ? list[0]! : null;
    await (only ? queue.add(only.name, only.data, only.opts) : queue.addBulk(list.map((j) => ({ name: j.name, data: j.data, opts: j.opts }))));
  }));
  return { replaced };
}

/**
 * A job id already in the queue makes adding it a no-op, also when that job failed for good (its
 * retries ran out during a long outage): the sweep removes such jobs first, so its work runs again.
 */
async function removeFailed(queue: Queue<DispatchJob>, jobs: QueuedDispatchJob[]): Promise<number> {
  const ids = jobs.map((j) => j.opts.jobId!);
  const states = await Promise.all(ids.map((id) => queue.getJobState(id)));
  let removed = 0;
  for (let i = 0; i < ids.length; i++) {
    if (states[i] === 'failed') removed += await queue.remove(ids[i]!);
  }
  return removed;
}
