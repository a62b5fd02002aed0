/**
 * Dispatch pools: one BullMQ worker per channel pool and lane (`sms.priority`, …). Each lane has
 * its own worker, so a promotional backlog never stands in front of a priority message; the
 * priority lane gets the most concurrency.
 */
import { Worker, DelayedError, type Job } from 'bullmq';
import type { Engine } from '../shared/engine/engine.js';
import type { Logger } from '../shared/logger.js';
import { LANES, dispatchQueueName, type ChannelPool, type DispatchJob, type Lane } from '../shared/queues.js';
import { isCallJobId } from '../shared/engine/dispatch-jobs.js';
import { logWorkerErrors, workerPrefix, type WorkerConnection } from './connection.js';

// A priority job holds its slot until its submit responses are durable (a few event-loop turns
// under load), so the lane gets more slots than it has work: an OTP never waits for a free one.
const LANE_SHARE: Record<Lane, number> = { priority: 4, transactional: 1, promotional: 1 };

/**
 * A job's lock lasts `lockMs` (renewed while it runs); when its worker dies, another takes the job
 * over once the lock lapsed and its stalled-job check ran: after `lockMs` to `2 × lockMs`. The
 * priority lane (one-time codes) checks twice as often. A run whose lock could not be renewed (its
 * process was paused past the lock, or cut off from Redis, and the job may be another process's
 * now) is aborted: its carriers write nothing more of its attempts, so the run that took the job
 * over resumes the hand-over alone (what both may write is at most what was in flight).
 */
export function startDispatchPool(
  engine: Engine, pool: ChannelPool, concurrency: number, conn: WorkerConnection, logger: Logger, lanes: readonly Lane[] = LANES,
  lockMs = 10_000,
): Worker[] {
  return lanes.map((lane) => {
    const worker = new Worker<DispatchJob>(
      dispatchQueueName(pool, lane),
      // Three parameters: BullMQ then gives each run an AbortSignal (`cancelJob` below).
      async (job: Job<DispatchJob>, token?: string, signal?: AbortSignal) => {
        const outcome = await engine.dispatch(job.data, undefined, lane, !isCallJobId(job.id), signal);
        if (outcome.delayUntil) {
          // Not yet inside the schedule or window: the same job waits until then (and checks again).
          await job.moveToDelayed(outcome.delayUntil.getTime(), token);
          throw new DelayedError();
        }
        return { handed: outcome.handed, rejected: outcome.rejected };
      },
      {
        connection: conn.connection, prefix: workerPrefix(conn, dispatchQueueName(pool, lane)), concurrency: Math.max(1, Math.round(concurrency * LANE_SHARE[lane])),
        lockDuration: lane === 'priority' ? lockMs / 2 : lockMs, stalledInterval: lane === 'priority' ? lockMs / 2 : lockMs,
      },
    );
    worker.on('failed', (job, err) => {
      if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        logger.error({ queue: worker.name, jobId: job.id, err: err.message }, 'dispatch job failed for good; the recovery sweep will retry it');
      }
    });
    worker.on('lockRenewalFailed', (jobIds) => {
      logger.warn({ queue: worker.name, jobIds }, 'dispatch job lock lost (the process was paused or cut off from Redis); its hand-over stops here');
      for (const id of jobIds) worker.cancelJob(id, 'lock lost');
    });
    logWorkerErrors(worker, conn, logger, 'dispatch');
    return worker;
  });
}
