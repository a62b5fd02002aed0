/**
 * The dispatch engine: the worker side that turns accepted messages into carrier attempts and
 * status events. It knows Postgres, its queues and the carrier interface; it does not know HTTP.
 */
import type { Db, Tx } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { CarrierSink, InboundReport, OutboundAttempt, StatusReport } from '../carriers/types.js';
import {
  Queues, LANE_OF_NUMBER, DISPATCH_JOB_OPTIONS, STATUS_JOB_OPTIONS, dispatchJobId, ttlJobId, statusPartitionOf,
  type DispatchJob, type StatusJob,
} from '../queues.js';
import { stepChannel, type FlowStep } from '../sending/message-schema.js';
import { poolOfChannel } from '../sending/accept.js';
import { CarrierRegistry } from './routing.js';
import { dispatchStep, type DispatchOutcome } from './dispatch.js';
import { applyReports, type ApplyOutcome } from './status.js';
import { pushTo } from '../collections.js';

/** Extension points for features that ride on the engine (verification codes). */
export interface EngineHooks {
  /** Texts for recipients whose text is not stored in clear (verification codes), by recipient id. */
  resolveTexts?(tx: Tx, source: string, recipientIds: number[]): Promise<Map<number, string> | null>;
  /** What the recipient row keeps of a text (a code is masked). */
  maskText?(source: string, text: string): string;
  /** After attempts reached their carrier. */
  afterHanded?(source: string, attempts: OutboundAttempt[]): Promise<void>;
  /** Inside the status transaction, for recipients whose attempt became `delivered`. */
  onDelivered?(tx: Tx, recipientIds: number[], sources: string[]): Promise<void>;
}

/** A recipient whose flow moves on to another step. */
export interface NextStep {
  messageId: string;
  step: number;
  recipientId: number;
  lane: number;
  flow: FlowStep[];
}

export interface EngineDeps {
  db: Db;
  queues: Queues;
  config: Config;
  logger: Logger;
  carriers: CarrierRegistry;
  hooks: EngineHooks;
  enqueueNextSteps(steps: NextStep[]): Promise<void>;
  /** A message of a combined job that may not run yet gets a delayed job of its own. */
  enqueueLater(step: Omit<NextStep, 'recipientId'> & { recipientIds: number[] }, at: Date): Promise<void>;
  scheduleTtl(attemptIds: number[], delayMs: number): Promise<void>;
}

export type InboundHandler = (message: InboundReport) => Promise<void>;

export class Engine {
  readonly deps: EngineDeps;
  readonly sink: CarrierSink;
  private readonly intake: StatusIntake;
  private inboundHandler: InboundHandler | null = null;

  constructor(base: { db: Db; queues: Queues; config: Config; logger: Logger; carriers: CarrierRegistry }, hooks: EngineHooks = {}) {
    const queues = base.queues;
    this.deps = {
      ...base,
      hooks,
      enqueueNextSteps: async (steps) => {
        if (steps.length === 0) {
          return;
        }
        await Promise.all(steps.map((s) => {
          const pool = poolOfChannel(stepChannel(s.flow[s.step]!).channel);
          const lane = LANE_OF_NUMBER[s.lane] ?? 'promotional';
          return queues.dispatchQueue(pool, lane).add('dispatch', { step: s.step, messages: [{ messageId: s.messageId, recipientIds: [s.recipientId] }] },
            { ...DISPATCH_JOB_OPTIONS, jobId: dispatchJobId(s.messageId, s.step, s.recipientId) });
        }));
      },
      enqueueLater: async (s, at) => {
        const pool = poolOfChannel(stepChannel(s.flow[s.step]!).channel);
        const lane = LANE_OF_NUMBER[s.lane] ?? 'promotional';
        await queues.dispatchQueue(pool, lane).add('dispatch', { step: s.step, messages: [{ messageId: s.messageId, recipientIds: s.recipientIds }] },
          { ...DISPATCH_JOB_OPTIONS, jobId: dispatchJobId(s.messageId, s.step), delay: Math.max(0, at.getTime() - Date.now()) });
      },
      scheduleTtl: async (attemptIds, delayMs) => {
        const byQueue = new Map<number, number[]>();
        for (const attemptId of attemptIds) {
          const p = attemptId % queues.statusPartitions;
          pushTo(byQueue, p, attemptId);
        }
        await Promise.all([...byQueue.entries()].map(([p, ids]) => queues.status[p]!.addBulk(ids.map((attemptId) => ({
          name: 'ttl',
          data: { kind: 'ttl' as const, attemptId },
          opts: { ...STATUS_JOB_OPTIONS, jobId: ttlJobId(attemptId), delay: delayMs },
        })))));
      },
    };
    this.intake = new StatusIntake(queues, base.logger);
    this.sink = {
      report: (updates) => this.intake.push(updates),
      inbound: async (message) => {
        if (!this.inboundHandler) {
          throw new Error('no inbound handler registered');
        }
        await this.inboundHandler(message);
      },
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

  dispatch(job: DispatchJob, now?: Date): Promise<DispatchOutcome> {
    return dispatchStep(this.deps, job, now);
  }

  applyStatusJob(job: StatusJob): Promise<ApplyOutcome> {
    return job.kind === 'ttl' ? applyReports(this.deps, [], [job.attemptId]) : applyReports(this.deps, job.reports);
  }

  async flush(): Promise<void> {
    await this.intake.flush();
  }

  async close(): Promise<void> {
    await this.intake.flush();
    await Promise.all(this.carriers.carriers().map((c) => c.close()));
  }
}

/**
 * Carrier reports are collected for a few milliseconds and written to the status queues as one
 * job per partition, so the status pool applies them in few transactions. Flushes are chained,
 * so the jobs enter each partition in the order the reports arrived. `push` resolves once the
 * batch is in Redis: a carrier may acknowledge a receipt to its peer only after that.
 */
export class StatusIntake {
  private buffer: StatusReport[] = [];
  private waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private timer: NodeJS.Timeout | null = null;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly queues: Queues,
    private readonly logger: Logger,
    private readonly lingerMs = 5,
    private readonly maxBatch = 500,
  ) {}

  push(reports: StatusReport[]): Promise<void> {
    if (reports.length === 0) {
      return Promise.resolve();
    }
    this.buffer.push(...reports);
    const done = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (this.buffer.length >= this.maxBatch) {
      void this.flush();
    } else if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.lingerMs);
    }
    return done;
  }

  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.buffer.length === 0) {
      return this.chain;
    }
    const reports = this.buffer;
    const waiters = this.waiters;
    this.buffer = [];
    this.waiters = [];
    this.chain = this.chain.then(async () => {
      const byPartition = new Map<number, StatusReport[]>();
      for (const report of reports) {
        const p = statusPartitionOf(report, this.queues.statusPartitions);
        pushTo(byPartition, p, report);
      }
      try {
        await Promise.all([...byPartition.entries()].map(([p, list]) =>
          this.queues.status[p]!.add('reports', { kind: 'reports', reports: list }, STATUS_JOB_OPTIONS)));
        waiters.forEach((w) => w.resolve());
      } catch (err) {
        this.logger.error({ err: (err as Error).message, count: reports.length }, 'status intake could not enqueue reports');
        waiters.forEach((w) => w.reject(err));
      }
    });
    return this.chain;
  }
}
