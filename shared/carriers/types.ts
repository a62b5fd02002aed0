/**
 * The one interface every carrier connector (sandbox, SMPP, later WhatsApp and Viber) implements.
 * The dispatch engine hands attempts to a carrier and learns what happened to them only through
 * the CarrierSink it gave the carrier: carriers never touch Postgres, queues or accounts.
 */
import type { AttemptState, Family, OutboundAttempt } from '../channels/index.js';

export type { AttemptState, Channel, OutboundAttempt } from '../channels/index.js';

/**
 * A status change reported by a carrier. Either `attemptId` (the carrier knows our attempt, e.g. a
 * submit response) or `carrier` + `ref` (a later receipt that names only the carrier's message id).
 */
export interface StatusReport {
  attemptId?: number;
  /**
   * Connection name the ref belongs to (e.g. `smpp.main`); with `ref`. With `attemptId`, the
   * connection that reports it (a WhatsApp or Viber callback naming our attempt id): the report
   * applies only to an attempt that connection carried, never to another's (an SMS, another account's
   * message named by a forged or colliding reference).
   */
  carrier?: string;
  /** Carrier message id: stored with `sent`, or used to find the attempt on a receipt. */
  ref?: string;
  /** For multi-part SMS: 0-based part index the ref belongs to, and how many parts there are. */
  part?: number;
  partCount?: number;
  state: AttemptState;
  /** e.g. `[0] Delivered`, `[1] Undelivered`, `[88] Throttled` */
  resultInfo: string;
  /** Unix milliseconds when it happened (carrier time when known). */
  at: number;
}

/** An inbound (mobile-originated) message, from any channel. */
export interface InboundReport {
  gateway: Family;
  /** Who sent it (a phone number in any form; normalised by the inbound path). */
  sender: string;
  /** The number or sender id that received it. */
  recipient: string;
  body: string;
  /** Unix milliseconds when the person sent it (receipt time when unknown). */
  at: number;
  /** Set only by the sandbox: the account whose key injected it (D5). */
  accountId?: number;
  /**
   * The carrier's id of this message, when it gives a unique one (WhatsApp's wamid): a message the
   * carrier delivers again (a webhook retried) is stored and reported once.
   */
  carrierRef?: string;
  /**
   * The outbound message this answers, when the carrier names it exactly (WhatsApp `context.id`,
   * Viber tracking data): our attempt id, or the carrier's ref of it. Without it, or when it names
   * nothing we sent, the D5 rule decides.
   */
  replyTo?: { attemptId: number } | { carrier: string; ref: string };
}

/** The engine's side of the contract: where carriers report what happened. */
export interface CarrierSink {
  /**
   * Resolves once the reports are durable: `true` when they are applied (committed to Postgres),
   * `false` (or nothing, from a sink that cannot tell) when they were queued to be applied later.
   * `priority`: reports of priority-lane attempts, applied apart from (and so never queued behind)
   * a backlog's reports.
   */
  report(updates: StatusReport[], opts?: { priority?: boolean }): Promise<boolean | void>;
  inbound(message: InboundReport): Promise<void>;
  /**
   * Of `refs` (readings of one receipt id), those registered under `carrier` to attempts still
   * waiting for a receipt, from the durable registrations in Postgres. A carrier that cannot tell
   * which reading a receipt means (SMPP while it learns its SMSC's id forms) asks this rather than
   * guessing.
   */
  matchRefs?(carrier: string, refs: string[]): Promise<string[]>;
  /**
   * What Postgres recorded of these attempts' earlier hand-overs under `carrier`: what a carrier
   * handing an attempt over again already had accepted, should its own record of that (in Redis)
   * be gone or already forgotten.
   */
  priorHandOvers?(carrier: string, attemptIds: number[]): Promise<PriorHandOvers>;
}

/** `CarrierSink.priorHandOvers`: the attempts' hand-overs as Postgres recorded them. */
export interface PriorHandOvers {
  /**
   * Attempts whose hand-over is recorded (no longer `sending`, or `handed_at` set): the engine
   * hands them no more, so a run that re-hands one raced another run that finished it.
   */
  handed: number[];
  /** Parts registered with a carrier ref (reported while the attempt was being handed over). */
  parts: RegisteredPart[];
}

/** A part of an attempt whose carrier ref is registered (`PriorHandOvers.parts`). */
export interface RegisteredPart {
  attemptId: number;
  part: number;
  ref: string;
}

export interface Carrier {
  /** Stable name, stored on attempts (`sandbox`, `smpp.<connection>`). */
  readonly name: string;
  /**
   * True when `send` resolves only after every attempt's first outcome (sent, rejected or failed)
   * was reported through the sink (SMPP: the submit responses). An SMS step then needs no ttl
   * timer: its success condition (`sent`) or its failure is already on its way.
   */
  readonly settlesOnSend?: boolean;
  /**
   * Hand attempts over. Resolves once the carrier has taken responsibility for them (queued in its
   * window or sent); outcomes arrive later through the sink. Must be safe to call again with the
   * same attempt after a crash (the engine re-hands attempts that never got a carrier answer, and
   * marks them `rehand`).
   */
  send(attempts: OutboundAttempt[]): Promise<void>;
  /**
   * Called once the engine has recorded the hand-over of these attempts (`attempts.handed_at`,
   * committed), for a carrier that does not settle on send: no job hands them again, except a copy
   * of the same job that read them before the record (a stalled job taken over while its first run
   * lives), moments later. What the carrier keeps to recognise a re-hand may go after that
   * (WhatsApp: the accepted wamids in Redis expire ten minutes later). Must not throw: what it
   * fails to shorten should expire on its own. `byEarlierRun`: a job run again found the record
   * made by an earlier run, which may have died before it reported all it knew: the carrier reports
   * now what it still holds of those attempts (WhatsApp: the wamids Meta gave, registered again,
   * which changes nothing when they were registered already).
   */
  handedOver?(attemptIds: number[], opts?: { byEarlierRun?: boolean }): Promise<void>;
  close(): Promise<void>;
}

/**
 * Whether an attempt's dispatch run still holds its job (`OutboundAttempt.hold`); an attempt handed
 * without a hold always does. A carrier writes nothing more of an attempt that is not held.
 */
export const holdsJob = (attempt: OutboundAttempt): boolean => attempt.hold === undefined || attempt.hold.held();
