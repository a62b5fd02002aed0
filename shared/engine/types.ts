/**
 * The engine's types, apart from the code that uses them, so that dispatch, status and the engine
 * that assembles them import this module and not each other.
 */
import type { Db, Tx } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Channel, OutboundAttempt } from '../channels/index.js';
import type { InboundReport } from '../carriers/types.js';
import type { Queues } from '../queues.js';
import type { CarrierRegistry } from './routing.js';
import type { MessageFactsCache } from './message-facts.js';
import type { AttemptFactsCache } from './attempt-facts.js';
import type { TtlTimers } from './ttl-timers.js';

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
  /** Immutable attempt facts, remembered by dispatch once committed and read by status batches (one per process). */
  attemptFacts: AttemptFactsCache;
  enqueueNextSteps(steps: NextStep[]): Promise<void>;
  /** A message of a combined job that may not run yet gets a delayed job of its own. */
  enqueueLater(step: Omit<NextStep, 'recipientId'> & { recipientIds: number[] }, at: Date): Promise<void>;
  /** The attempts' ttl timers (ttl-timers.ts): set at hand-over, removed as attempts settle. */
  ttlTimers: Pick<TtlTimers, 'set' | 'setEachKeep' | 'clear'>;
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

