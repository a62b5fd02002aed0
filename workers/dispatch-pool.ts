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
import type { DispatchOutcome } from '../shared/engine/dispatch.js';
import { RunLease } from '../shared/engine/run-lease.js';
import { DispatchBatcher } from '../shared/engine/dispatch-batches.js';
import { logWorkerErrors, workerPrefix, type WorkerConnection } from './connection.js';

// A priority job holds its slot until its submit responses are durable (a few event-loop turns
// under load), so the lane gets more slots than it has work: an OTP never waits for a free one.
const LANE_SHARE: Record<Lane, number> = { priority: 4, transactional: 1, promotional: 1 };

/**
 * A job's lock lasts `lockMs` (renewed while it runs); when its worker dies, another takes the job
 * over once the lock lapsed and its stalled-job check ran: after `lockMs` to `2 × lockMs`. The
 * priority lane (one-time codes) checks twice as often. Each run holds its job only while its lock
 * is known to be renewed (`RunLease`): a run whose process was paused past the lock, or cut off
 * from Redis, or whose renewal was refused, no longer holds it, and its carriers write nothing
 * more of its attempts, so the run that took the job over resumes the hand-over alone (what both
 * may write is what was in flight when the first one stopped).
 */
export function startDispatchPool(
  engine: Engine, pool: ChannelPool, concurrency: number, conn: WorkerConnection, logger: Logger, lanes: readonly Lane[] = LANES,
  lockMs = 10_000,
): Worker[] {
  return lanes.map((lane) => {
    const lockDuration = lane === 'priority' ? lockMs / 2 : lockMs;
    const leases = new Map<string, RunLease>();
    // The bulk lanes' jobs that run at the same moment go together (dispatch-batches.ts); a
    // priority job goes alone, at once.
    const batcher = lane === 'priority' ? null : new DispatchBatcher((runs, committed) => engine.dispatchRuns(runs, lane, committed));
    const worker = new Worker<DispatchJob>(
      dispatchQueueName(pool, lane),
      async (job: Job<DispatchJob>, token?: string) => {
        // Renewed through `extendJobLocks` below; a run of the same job that this worker took
        // again replaces it, and the earlier run's lapses.
        const lease = new RunLease(lockDuration, job.processedOn ?? Date.now());
        leases.set(job.id!, lease);
        let outcome: DispatchOutcome;
        try {
          const delaySelf = !isCallJobId(job.id);
          outcome = await (batcher ? batcher.run({ job: job.data, delaySelf, hold: lease }) : engine.dispatch(job.data, undefined, lane, delaySelf, lease));
        } catch (err) {
          if (!lease.held()) logger.warn({ queue: worker.name, jobId: job.id }, 'dispatch run stopped: its job lock was not renewed in time (the process was paused or cut off from Redis); the job is handed again');
          throw err;
        } finally {
          if (leases.get(job.id!) === lease) leases.delete(job.id!);
        }
        if (outcome.delayUntil) {
          // Not yet inside the schedule or window: the same job waits until then (and checks again).
          await job.moveToDelayed(outcome.delayUntil.getTime(), token);
          throw new DelayedError();
        }
        return { handed: outcome.handed, rejected: outcome.rejected };
      },
      {
        connection: conn.connection, prefix: workerPrefix(conn, dispatchQueueName(pool, lane)), concurrency: Math.max(1, Math.round(concurrency * LANE_SHARE[lane])),
        lockDuration, stalledInterval: lockDuration,
      },
    );
    worker.on('failed', (job, err) => {
      if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        logger.error({ queue: worker.name, jobId: job.id, err: err.message }, 'dispatch job failed for good; the recovery sweep will retry it');
      }
    });
    // BullMQ's lock extender calls this; the holds count from when the renewal was sent.
    const extendJobLocks = worker.extendJobLocks.bind(worker);
    worker.extendJobLocks = async (jobIds, tokens, duration) => {
      const sentAt = Date.now();
      const refused = await extendJobLocks(jobIds, tokens, duration);
      for (const id of jobIds) if (!refused.includes(id)) leases.get(id)?.renewed(sentAt);
      return refused;
    };
    worker.on('lockRenewalFailed', (jobIds) => {
      for (const id of jobIds) leases.get(id)?.lost();
    });
    logWorkerErrors(worker, conn, logger, 'dispatch');
    return worker;
  });
}
