/**
 * What a channel module declares. A channel (`sms`, `viber`, `whatsapp_text`, `whatsapp_template`)
 * is one module in this folder: its step object's schema, its family, when its step succeeds (D3),
 * the fields its attempts carry to a carrier and the key of its object in sentMessage events.
 * Everything per channel elsewhere (queue names, config keys, admin schema values, sandbox
 * outcomes, transitions) is derived from the registry in `index.ts`.
 */
import type Joi from 'joi';
import type { SmsPlan } from '../sms/gsm7.js';

/**
 * A channel family: what inbound events name as `gateway`, what numbers are assigned for, and the
 * worker pool (its dispatch queues and their concurrency): `whatsapp_text` and
 * `whatsapp_template` share the `whatsapp` family and pool.
 */
export const FAMILIES = ['sms', 'viber', 'whatsapp'] as const;
export type Family = (typeof FAMILIES)[number];

/** Result of one attempt (recipient × flow step): the `result` field of sentMessage events (D3). */
export type AttemptState = 'sending' | 'sent' | 'delivered' | 'seen' | 'undelivered' | 'rejected' | 'failed';

/** Fields every step object may have (the spec's tables give each channel a subset). */
export interface StepBase {
  sender?: string;
  ttl?: number;
}

/** The common part of what a carrier is handed for one attempt; never containing secrets. */
export interface AttemptBase {
  /** Primary key of the attempt row; the handle for every later report. */
  attemptId: number;
  /** The recipient's public id (`<message_id>-<index>` or its own id). */
  recipientPublicId: string;
  /** The message's account (senders are registered per account, D12). */
  accountId: number;
  /** Destination, E.164 digits without `+`. */
  to: string;
  sender: string;
  /** Final text as it will be sent (channel body chosen, `sms.type=sms` transliteration applied). */
  text: string;
  /** Minutes the step may take before the engine moves on; carriers may pass it on (validity period). */
  ttlMinutes: number;
  /** Priority or transactional lane: carriers serve it before queued promotional attempts. */
  priority?: boolean;
  /**
   * The attempt's lane is at-most-once (AT_MOST_ONCE_LANES): when a carrier cannot tell whether it
   * took the attempt (a submit written but unanswered, a crash), it does not send it again and
   * reports it sent but unconfirmed. Otherwise (the default) it sends it again: at-least-once.
   */
  atMostOnce?: boolean;
  /**
   * Handed before: the carrier must check what it already accepted. Set by the engine only when it
   * hands an attempt that was recorded by an earlier dispatch run (a job retried after a crash or a
   * failed send); an attempt handed for the first time cannot have been accepted anywhere, so a
   * carrier may skip that lookup for it.
   */
  rehand?: boolean;
  /**
   * The dispatch run's hold on its job (`RunLease` in shared/engine/run-lease.ts). Not held: the
   * job's lock was not renewed in time (the process was paused or cut off from Redis) and BullMQ
   * may have given the job to another process. A carrier that reads it writes nothing more of the
   * attempt and gives it back; the run that took the job over hands it again, resuming from what
   * was accepted.
   */
  hold?: { held(): boolean };
}

/** What dispatch knows when it plans one recipient's attempt at a step. */
export interface PlanInput {
  base: AttemptBase;
  /** The text before channel rules: a resolved text (verification code), else the step's body, else the message's. */
  text: string | undefined;
  /** The account's default SMS sender, else the service's. */
  defaultSmsSender: string;
  /** SMS planning shared by a dispatch run's recipients (the same text is planned once). */
  planSms(text: string, type: 'utf' | 'sms'): SmsPlan;
}

/** A planned attempt: what the carrier gets, and what it costs in billing segments. */
export interface Planned<A> {
  attempt: A;
  /** Billing segments (`count` in events); price = count × unit price. */
  count: number;
}

export interface ChannelModule<N extends string, S extends StepBase, A extends AttemptBase & { channel: N }> {
  readonly name: N;
  readonly family: Family;
  /** The key of the channel object in sentMessage events. */
  readonly eventKey: string;
  /** The step object's schema (the spec's channel table). */
  readonly schema: Joi.ObjectSchema<S>;
  /** D3: the state at which a step of this channel has succeeded (`seen` follows `delivered`). */
  readonly succeedsAt: 'sent' | 'delivered';
  /** Whether a step needs a text (its own body or the message's); templates carry their own. */
  readonly needsBody: boolean;
  /** The channel's name in words, for result_info texts (`Not a Viber user`). */
  readonly label: string;
  /**
   * The sender when the step names none (SMS: the account's default, D2). Null: the step must name
   * one (the schema requires it), or none applies.
   */
  defaultSender(step: S, input: PlanInput): string;
  /** This channel's attempt for one recipient. */
  plan(step: S, input: PlanInput): Planned<A>;
}
