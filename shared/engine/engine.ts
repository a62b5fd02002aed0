/**
 * The dispatch engine: the worker side that turns accepted messages into carrier attempts and
 * status events. It knows Postgres, its queues and the carrier interface; it does not know HTTP.
 */
import type { Db, Tx } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { CarrierSink, Channel, InboundReport, OutboundAttempt, StatusReport } from '../carriers/types.js';
import {
  Queues, LANE_OF_NUMBER, DISPATCH_JOB_OPTIONS, STATUS_JOB_OPTIONS, dispatchJobId, ttlJobId, statusPartitionOf,
  type DispatchJob, type StatusJob, type Lane,
} from '../queues.js';
import { poolOfChannel } from '../sending/accept.js';
import { CarrierRegistry } from './routing.js';
import { dispatchStep, type DispatchOutcome } from './dispatch.js';
import { applyReports, type ApplyOutcome } from './status.js';
import { pushTo } from '../collections.js';
import { MessageFactsCache } from './message-facts.js';

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
  /** The channel of step `step` (it decides the dispatch queue). */
  channel: Channel;
}

export interface EngineDeps {
  db: Db;
  queues: Queues;
  config: Config;
  logger: Logger;
  carriers: CarrierRegistry;
  hooks: EngineHooks;
  /** Immutable message facts, remembered by dispatch and read by status batches (one per process). */
  messageFacts: MessageFactsCache;
  enqueueNextSteps(steps: NextStep[]): Promise<void>;
  /** A message of a combined job that may not run yet gets a delayed job of its own. */
  enqueueLater(step: Omit<NextStep, 'recipientId'> & { recipientIds: number[] }, at: Date): Promise<void>;
  scheduleTtl(attemptIds: number[], delayMs: number): Promise<void>;
}

/**
 * Postgres pools kept apart from the main one, so that the work they serve never queues behind a
 * backlog's connections: priority-lane dispatch (an OTP must not wait for a promotional burst's
 * transactions) and the status intake (carriers wait for it before acknowledging).
 */
export interface EnginePools {
  priority?: Db;
  status?: Db;
}

export type InboundHandler = (message: InboundReport) => Promise<void>;

export class Engine {
  readonly deps: EngineDeps;
  readonly sink: CarrierSink;
  private readonly intake: StatusIntake;
  private readonly priorityIntake: StatusIntake;
  private inboundHandler: InboundHandler | null = null;

  /** `deps` on the priority lane's own connections (see `EnginePools`). */
  private readonly priorityDeps: EngineDeps;

  constructor(base: { db: Db; queues: Queues; config: Config; logger: Logger; carriers: CarrierRegistry }, hooks: EngineHooks = {}, pools: EnginePools = {}) {
    const queues = base.queues;
    this.deps = {
      ...base,
      hooks,
      messageFacts: new MessageFactsCache(),
      enqueueNextSteps: async (steps) => {
        if (steps.length === 0) {
          return;
        }
        await Promise.all(steps.map((s) => {
          const pool = poolOfChannel(s.channel);
          const lane = LANE_OF_NUMBER[s.lane] ?? 'promotional';
          return queues.dispatchQueue(pool, lane).add('dispatch', { step: s.step, messages: [{ messageId: s.messageId, recipientIds: [s.recipientId] }] },
            { ...DISPATCH_JOB_OPTIONS, jobId: dispatchJobId(s.messageId, s.step, s.recipientId) });
        }));
      },
      enqueueLater: async (s, at) => {
        const pool = poolOfChannel(s.channel);
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

  dispatch(job: DispatchJob, now?: Date, lane?: Lane): Promise<DispatchOutcome> {
    return dispatchStep(lane === 'priority' ? this.priorityDeps : this.deps, job, now);
  }

  applyStatusJob(job: StatusJob): Promise<ApplyOutcome> {
    return job.kind === 'ttl' ? applyReports(this.deps, [], [job.attemptId]) : applyReports(this.deps, job.reports);
  }

  async flush(): Promise<void> {
    await Promise.all([this.intake.flush(), this.priorityIntake.flush()]);
  }

  async close(): Promise<void> {
    await this.flush();
    await Promise.all(this.carriers.carriers().map((c) => c.close()));
  }
}

const RETRY_PAUSE_MS = 100;

/**
 * Carrier reports are applied where they arrive, in batches: while one batch's transaction runs,
 * the reports that come in meanwhile wait and then go together in the next one, so the batch size
 * follows the load (one report when idle, hundreds under a burst) and one transaction per batch
 * serves them all. One batch at a time per process keeps the reports of one attempt in the order
 * they arrived. `push` resolves once its reports are committed: a carrier acknowledges a receipt
 * to its peer only after that. A batch that fails is tried once more; when it still cannot be
 * applied (Postgres down, a lock held too long), its reports go to the status queues instead,
 * whose pool retries them for hours; `push` rejects only when neither worked. Reports queued so
 * may then be applied after later ones (the state path still ignores moves backwards).
 */
export class StatusIntake {
  private buffer: Array<{ reports: StatusReport[]; resolve: () => void; reject: (err: unknown) => void }> = [];
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly apply: (reports: StatusReport[]) => Promise<unknown>,
    private readonly enqueue: (reports: StatusReport[]) => Promise<void>,
    private readonly logger: Logger,
    private readonly lingerMs = 2,
    private readonly maxBatch = 2000,
  ) {}

  push(reports: StatusReport[]): Promise<void> {
    if (reports.length === 0) {
      return Promise.resolve();
    }
    const done = new Promise<void>((resolve, reject) => this.buffer.push({ reports, resolve, reject }));
    // An idle intake waits a moment for company; a busy one starts the next batch when the running one ends.
    if (!this.running && !this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.start();
      }, this.lingerMs);
    }
    return done;
  }

  /** Resolves once every report pushed so far has been applied or queued. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.start();
    while (this.running) {
      await this.running;
    }
  }

  private start(): void {
    if (this.running) {
      return;
    }
    this.running = this.drain().finally(() => {
      this.running = null;
      // Reports pushed after the drain's last look, before this callback ran.
      if (this.buffer.length > 0) {
        this.start();
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      const taken: typeof this.buffer = [];
      let count = 0;
      while (this.buffer.length > 0 && (taken.length === 0 || count + this.buffer[0]!.reports.length <= this.maxBatch)) {
        const entry = this.buffer.shift()!;
        taken.push(entry);
        count += entry.reports.length;
      }
      const reports: StatusReport[] = [];
      for (const t of taken) {
        for (const r of t.reports) {
          reports.push(r);
        }
      }
      // Once more after a pause (a deadlock victim, a dropped connection), then to the queues.
      let applied = false;
      for (let attempt = 0; attempt < 2 && !applied; attempt++) {
        try {
          if (attempt > 0) {
            await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
          }
          await this.apply([...reports]); // a copy: applying appends the receipts it releases
          applied = true;
        } catch (err) {
          this.logger.warn({ err: (err as Error).message, count, attempt }, 'status batch not applied');
        }
      }
      if (applied) {
        taken.forEach((t) => t.resolve());
        continue;
      }
      try {
        await this.enqueue(reports);
        taken.forEach((t) => t.resolve());
      } catch (err) {
        this.logger.error({ err: (err as Error).message, count }, 'status intake could not apply or queue reports');
        taken.forEach((t) => t.reject(err));
      }
    }
  }
}
