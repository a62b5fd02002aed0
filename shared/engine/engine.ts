/**
 * The dispatch engine: the worker side that turns accepted messages into carrier attempts and
 * status events. It knows Postgres, its queues and the carrier interface; it does not know HTTP.
 */
import type { Db } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { CarrierSink, OutboundAttempt, StatusReport } from '../carriers/types.js';
import { Queues, STATUS_JOB_OPTIONS, statusPartitionOf, type DispatchJob, type StatusJob, type Lane } from '../queues.js';
import type { Redis } from '../redis.js';
import { TtlTimers } from './ttl-timers.js';
import type { CarrierRegistry } from './routing.js';
import { dispatchRuns, dispatchStep, type DispatchOutcome, type DispatchRun } from './dispatch.js';
import { applyReports, matchWaitingRefs, priorHandOvers, type ApplyOutcome } from './status.js';
import { pushTo } from '../collections.js';
import { MessageFactsCache } from './message-facts.js';
import { AttemptFactsCache } from './attempt-facts.js';
import { StatusIntake } from './status-intake.js';
import { addDispatchJobs, messageJob, recipientJob } from './dispatch-jobs.js';
import type { EngineDeps, EngineHooks, EnginePools, InboundHandler } from './types.js';

export type { EngineDeps, EngineHooks, EnginePools, InboundHandler, NextStep } from './types.js';

export class Engine {
  readonly deps: EngineDeps;
  /** The attempts' ttl timers; the status role fires them (TtlExpiry). */
  readonly ttlTimers: TtlTimers;
  readonly sink: CarrierSink;
  private readonly intake: StatusIntake;
  private readonly priorityIntake: StatusIntake;
  private inboundHandler: InboundHandler | null = null;

  /** `deps` on the priority lane's own connections (see `EnginePools`). */
  private readonly priorityDeps: EngineDeps;

  constructor(
    { redis, ...base }: { db: Db; queues: Queues; redis: Redis; config: Config; logger: Logger; carriers: CarrierRegistry },
    hooks: EngineHooks = {}, pools: EnginePools = {},
  ) {
    const queues = base.queues;
    this.ttlTimers = new TtlTimers(redis, base.config.redisPrefix);
    this.deps = {
      ...base,
      hooks,
      messageFacts: new MessageFactsCache(),
      attemptFacts: new AttemptFactsCache(),
      enqueueNextSteps: async (steps) => {
        if (steps.length > 0) {
          await addDispatchJobs(queues, steps.map((s) => recipientJob(s, s.messageId, s.step, s.recipientId)));
        }
      },
      enqueueLater: async (s, at) => {
        await addDispatchJobs(queues, [messageJob(s, s.messageId, s.step, s.recipientIds, Math.max(0, at.getTime() - Date.now()))]);
      },
      ttlTimers: this.ttlTimers,
    };
    // The deps of status batches and priority dispatch: the same, on their own connections.
    const statusDeps = pools.status ? { ...this.deps, db: pools.status } : this.deps;
    this.priorityDeps = pools.priority ? { ...this.deps, db: pools.priority } : this.deps;
    const apply = (reports: StatusReport[]) => applyReports(statusDeps, reports);
    const enqueue = async (reports: StatusReport[]) => {
      const byPartition = new Map<number, StatusReport[]>();
      for (const report of reports) {
        pushTo(byPartition, statusPartitionOf(report, queues.statusPartitions), report);
      }
      await Promise.all([...byPartition.entries()].map(([p, list]) =>
        queues.status[p]!.add('reports', { kind: 'reports', reports: list }, STATUS_JOB_OPTIONS)));
    };
    this.intake = new StatusIntake(apply, enqueue, base.logger);
    // Reports of priority attempts run beside the backlog's batches, not after them. The two may
    // touch one ref at once (a receipt in one, its submit response in the other): both write that
    // ref's `carrier_refs` row, whose unique key serialises them, as for the status pool's jobs.
    this.priorityIntake = new StatusIntake(apply, enqueue, base.logger, 0);
    this.sink = {
      report: (updates, opts) => (opts?.priority ? this.priorityIntake : this.intake).push(updates),
      inbound: async (message) => {
        if (!this.inboundHandler) {
          throw new Error('no inbound handler registered');
        }
        await this.inboundHandler(message);
      },
      matchRefs: (carrier, refs) => matchWaitingRefs(statusDeps.db, carrier, refs),
      priorHandOvers: (carrier, attemptIds) => priorHandOvers(statusDeps.db, carrier, attemptIds),
    };
  }

  setHooks(hooks: EngineHooks): void {
    Object.assign(this.deps.hooks, hooks);
  }

  onInbound(handler: InboundHandler): void {
    this.inboundHandler = handler;
  }

  get carriers(): CarrierRegistry {
    return this.deps.carriers;
  }

  /** `delaySelf`, `hold`: see `dispatchStep` (delaySelf false for a call's job). */
  dispatch(job: DispatchJob, now?: Date, lane?: Lane, delaySelf = true, hold?: OutboundAttempt['hold']): Promise<DispatchOutcome> {
    return dispatchStep(lane === 'priority' ? this.priorityDeps : this.deps, job, now, delaySelf, hold);
  }

  /** Runs of one step together (`dispatchRuns`; dispatch-batches.ts takes them). */
  dispatchRuns(runs: DispatchRun[], lane: Lane, committed?: () => void): Promise<DispatchOutcome[]> {
    return dispatchRuns(lane === 'priority' ? this.priorityDeps : this.deps, runs, new Date(), committed);
  }

  applyStatusJob(job: StatusJob): Promise<ApplyOutcome> {
    // A `ttl` job is a timer set by a version before ttl-timers.ts, still waiting in a status queue.
    return job.kind === 'ttl' ? this.expire([job.attemptId]) : applyReports(this.deps, job.reports);
  }

  /** The attempts' ttl passed: each still waiting for its step's condition ends `undelivered` (D3). */
  expire(attemptIds: number[]): Promise<ApplyOutcome> {
    return applyReports(this.deps, [], attemptIds);
  }

  async flush(): Promise<void> {
    await Promise.all([this.intake.flush(), this.priorityIntake.flush()]);
  }

  /** Applies what the intakes hold; the carriers are closed by whoever opened them. */
  async close(): Promise<void> {
    await this.flush();
  }
}

