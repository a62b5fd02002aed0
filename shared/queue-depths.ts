/** Queue depths for the metrics (read from Redis on scrape, in the web process only: one reading per deployment). */
import type { Queue } from 'bullmq';
import type { Queues } from './queues.js';
import type { QueueReading } from './metrics.js';

const STATES = ['waiting', 'prioritized', 'active', 'delayed', 'failed'] as const;

/** `sms.priority` → family sms, lane priority; `status.2` → status; `webhooks` → webhooks. */
export function queueLabels(name: string): { family: string; lane: string } {
  const [family = name, rest = ''] = name.split('.');
  return { family, lane: /^\d+$/.test(rest) ? '' : rest };
}

async function readOne(queue: Queue, now: number): Promise<QueueReading> {
  const [counts, oldest] = await Promise.all([
    queue.getJobCounts(...STATES),
    queue.getJobs(['waiting'], 0, 0, true),
  ]);
  const job = oldest[0];
  // A job that was added with a delay fell due at timestamp + delay, not when it was added.
  const dueAt = job ? job.timestamp + (job.delay ?? 0) : now;
  return { queue: queue.name, ...queueLabels(queue.name), counts, oldestWaitingSeconds: Math.max(0, (now - dueAt) / 1000) };
}

export async function readQueueDepths(queues: Queues, now = Date.now()): Promise<QueueReading[]> {
  return Promise.all(queues.all().map((q) => readOne(q, now)));
}
