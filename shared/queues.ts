/**
 * Every BullMQ queue of the service, its typed job payload and default options. Payloads carry
 * ids, never secrets or message text: workers read the rows from Postgres. Job ids are
 * deterministic where a duplicate enqueue must be a no-op (BullMQ refuses `:` in ids: we use `.`).
 *
 * On a Redis Cluster each queue's keys carry a hash tag of their own (`queuePrefix`): BullMQ's
 * scripts touch several keys of one queue, which must share a slot, and a tag per queue (not one
 * for the whole service) spreads the queues over the cluster's nodes.
 */
import { Queue, type JobsOptions, type ConnectionOptions } from 'bullmq';
import { isCluster } from './redis.js';
import type { StatusReport } from './carriers/types.js';
import { FAMILIES, type Family } from './channels/index.js';

export const LANES = ['priority', 'transactional', 'promotional'] as const;
export type Lane = (typeof LANES)[number];
/** Dispatch worker pools: one per channel family (whatsapp_text and whatsapp_template share one). */
export const CHANNEL_POOLS = FAMILIES;
export type ChannelPool = Family;

/** Lane of a message from its tag (D2): `priority` > `transactional` > everything else. */
export function laneOfTag(tag: string): Lane {
  return tag === 'priority' ? 'priority' : tag === 'transactional' ? 'transactional' : 'promotional';
}
export const LANE_NUMBER: Record<Lane, number> = { priority: 0, transactional: 1, promotional: 2 };
export const LANE_OF_NUMBER: readonly Lane[] = LANES;

/**
 * Start (or resume) one flow step for some recipients of one or more message objects. A batch
 * call's objects that are due now travel in one job (one transaction for up to 100 recipients);
 * scheduled ones and later flow steps get a job of their own.
 */
export interface DispatchJob {
  step: number;
  messages: Array<{ messageId: string; recipientIds: number[] }>;
}

/**
 * Carrier reports in a batch, or a step's ttl timer as a version before ttl-timers.ts scheduled it
 * (a delayed job per attempt; none are added now, those still waiting fire as before).
 */
export type StatusJob =
  | { kind: 'reports'; reports: StatusReport[] }
  | { kind: 'ttl'; attemptId: number };

/** Deliver one stored webhook batch. */
export interface WebhookJob {
  batchId: number;
  /** Scheme://host:port of the callback (no path, no credentials): the per-receiver fairness key. */
  origin: string;
}

export function dispatchQueueName(pool: ChannelPool, lane: Lane): string {
  return `${pool}.${lane}`;
}
/** Status queues are partitioned: `status.0` … `status.<n-1>`; see `statusPartitionOf`. */
export const STATUS_QUEUE = 'status';
export const statusQueueName = (partition: number): string => `${STATUS_QUEUE}.${partition}`;

/**
 * Which status partition a report belongs to. Reports of one attempt always land in the same
 * partition, and each partition is applied one batch at a time in arrival order (global
 * concurrency 1), so an attempt's `sent` is never overtaken by its own `undelivered`. Receipts
 * that name only a carrier ref are placed by the ref; their order against the submit response is
 * restored through receipts parked in `carrier_refs` and the state path.
 */
export function statusPartitionOf(report: { attemptId?: number; carrier?: string; ref?: string }, partitions: number): number {
  if (report.attemptId !== undefined) {
    return report.attemptId % partitions;
  }
  const text = `${report.carrier ?? ''}\u0000${report.ref ?? ''}`;
  let hash = 0;
  for (let i = 0; i < text.length; i++) {
    hash = (hash * 31 + text.charCodeAt(i)) | 0;
  }
  return Math.abs(hash) % partitions;
}
export const WEBHOOK_QUEUE = 'webhooks';

/**
 * Whether a queue's Redis connection is up. While Redis is down the queue's client holds commands
 * until it reconnects, so a caller whose work is already safe in Postgres (accepted messages,
 * replayed webhook batches) asks first and leaves the work to the recovery sweep at once.
 */
export async function isQueueConnected(queue: Queue): Promise<boolean> {
  return (await queue.backend.client).status === 'ready';
}

/**
 * The BullMQ prefix of a queue. One Redis: `prefix` (REDIS_PREFIX), so keys stay
 * `sb:sms.priority:wait`, as every version wrote them (delayed jobs and status batches survive an
 * upgrade). A Redis Cluster: `{sb:sms.priority}`, a hash tag per queue (BullMQ's documented way:
 * `{sb:sms.priority}:sms.priority:wait`), so every key of a queue is in one slot.
 */
export function queuePrefix(prefix: string, queue: string, cluster: boolean): string {
  return cluster ? `{${prefix}:${queue}}` : prefix;
}

export const webhookJobId = (batchId: number): string => `wh.${batchId}`;

const KEEP = { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10000 } } satisfies JobsOptions;

/**
 * Jobs retry through a dependency outage (Postgres or Redis down, a carrier link lost): 0.5 s
 * doubling, 16 attempts, about 9 h in all. Dispatch jobs are idempotent (a run writes nothing twice
 * and re-hands only what never reached a carrier); status jobs carry reports a carrier was told are
 * safe. A job that fails for good anyway is replaced by the recovery sweep, which finds its work in
 * Postgres.
 */
const RETRY_THROUGH_OUTAGES = { attempts: 16, backoff: { type: 'exponential', delay: 500 } } satisfies JobsOptions;
export const DISPATCH_JOB_OPTIONS: JobsOptions = { ...KEEP, ...RETRY_THROUGH_OUTAGES };
export const STATUS_JOB_OPTIONS: JobsOptions = { ...KEEP, ...RETRY_THROUGH_OUTAGES };

/** All producers of the service share these Queue objects (one Redis connection). */
export class Queues {
  readonly dispatch = new Map<string, Queue<DispatchJob>>();
  readonly status: Array<Queue<StatusJob>>;
  readonly webhooks: Queue<WebhookJob>;
  /** Whether `connection` is a Redis Cluster client (then each queue has a hash tag of its own). */
  readonly cluster: boolean;

  constructor(
    readonly connection: ConnectionOptions,
    readonly prefix: string,
    /** Number of status partitions; must be the same in every process of a deployment. */
    readonly statusPartitions = 4,
    /** Where the queues' connection errors go (a queue without an 'error' listener prints each one's stack). */
    onError: (source: string, err: Error) => void = () => undefined,
  ) {
    this.cluster = isCluster(connection);
    for (const pool of CHANNEL_POOLS) {
      for (const lane of LANES) {
        const name = dispatchQueueName(pool, lane);
        this.dispatch.set(name, new Queue<DispatchJob>(name, { connection, prefix: this.prefixOf(name) }));
      }
    }
    this.status = Array.from({ length: statusPartitions }, (_, p) => new Queue<StatusJob>(statusQueueName(p), { connection, prefix: this.prefixOf(statusQueueName(p)) }));
    this.webhooks = new Queue<WebhookJob>(WEBHOOK_QUEUE, { connection, prefix: this.prefixOf(WEBHOOK_QUEUE) });
    for (const queue of this.all()) {
      queue.on('error', (err) => onError(`queue ${queue.name}`, err));
    }
  }

  /** The BullMQ prefix of the queue `name` (workers on it must use the same). */
  prefixOf(name: string): string {
    return queuePrefix(this.prefix, name, this.cluster);
  }

  dispatchQueue(pool: ChannelPool, lane: Lane): Queue<DispatchJob> {
    return this.dispatchByName(dispatchQueueName(pool, lane));
  }

  dispatchByName(name: string): Queue<DispatchJob> {
    const queue = this.dispatch.get(name);
    if (!queue) {
      throw new Error(`no dispatch queue ${name}`);
    }
    return queue;
  }

  all(): Queue[] {
    return [...this.dispatch.values(), ...this.status, this.webhooks] as Queue[];
  }

  /** The status queue of an attempt's partition (its reports). */
  statusQueueFor(attemptId: number): Queue<StatusJob> {
    return this.status[attemptId % this.statusPartitions]!;
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((q) => q.close()));
  }
}
