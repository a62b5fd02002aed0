/**
 * The attempt state machine (spec "States and transitions", D3), as pure functions.
 *
 *   sending → sent | failed | rejected | undelivered
 *   sent → delivered | undelivered | failed | rejected
 *   delivered → seen
 *   seen, undelivered, rejected, failed are final.
 *
 * A report may skip a state the carrier never told us about (a receipt that arrives before the
 * submit response): `planTransition` returns the whole path so that every state a receiver
 * expects is still reported once, in order. A report that is not a move forward returns null:
 * duplicates and late reports change nothing.
 */
import { CHANNEL_MODULES, isStepSuccess, stepOf, type AttemptState, type Channel, type FlowStep } from '../channels/index.js';
import { assertUnreachable } from '../errors.js';

const NEXT: Record<AttemptState, readonly AttemptState[]> = {
  sending: ['sent', 'failed', 'rejected', 'undelivered'],
  sent: ['delivered', 'undelivered', 'failed', 'rejected'],
  delivered: ['seen'],
  seen: [],
  undelivered: [],
  rejected: [],
  failed: [],
};

export const FINAL_STATES: ReadonlySet<AttemptState> = new Set(['seen', 'undelivered', 'rejected', 'failed']);

/** How far along the state path each state is: the order moves are applied in, and receipts compared by. */
export const STATE_RANK: Readonly<Record<AttemptState, number>> = {
  sending: 0, sent: 1, delivered: 2, undelivered: 2, rejected: 2, failed: 2, seen: 3,
};

/**
 * Of two receipts for one carrier ref that are kept before they can be applied (parked until the
 * ref is registered, or met in one status batch, where one row per ref is written), whether the
 * earlier stays: it does when it is further along than the later one. A carrier that reports out
 * of order (Meta: `failed` before the `sent` that preceded it; a report retried after a later one)
 * then loses the late intermediate report, not the outcome. Of two at the same rank the later one
 * wins, as a carrier's correction does. Pure.
 */
export function keepsEarlierReceipt(earlier: AttemptState, later: AttemptState): boolean {
  return STATE_RANK[earlier] > STATE_RANK[later];
}

/**
 * States to pass through (in order) to move from `current` to `target`, or null when that is no
 * valid move. `ttlExpired`: the attempt was ended `undelivered` by its step's ttl, not by the
 * carrier; a receipt that still says `delivered`/`seen` is then reported (D3: late receipts of
 * abandoned steps are reported, and never start another step).
 */
export function planTransition(current: AttemptState, target: AttemptState, ttlExpired = false): AttemptState[] | null {
  if (ttlExpired && current === 'undelivered' && (target === 'delivered' || target === 'seen')) {
    return target === 'delivered' ? ['delivered'] : ['delivered', 'seen'];
  }
  if (NEXT[current].includes(target)) {
    return [target];
  }
  // Receipts that overtake the submit response: sending → (sent) → delivered → (seen).
  if (current === 'sending' && (target === 'delivered' || target === 'seen')) {
    return target === 'delivered' ? ['sent', 'delivered'] : ['sent', 'delivered', 'seen'];
  }
  if (current === 'sent' && target === 'seen') {
    return ['delivered', 'seen'];
  }
  return null;
}

/**
 * `planTransition` for a receipt that names a carrier ref registered to the attempt. For a channel
 * whose step succeeds at `sent` (SMS), a registered ref means the carrier accepted (part of) the
 * message, which is what `sent` is: an attempt still `sending` (a long SMS whose last part is not
 * accepted yet) passes through `sent` first, so a failure it reports is charged as one after
 * `sent` (D3), not refunded as one the carrier never took. Other channels register a ref before
 * the carrier took the message (a WhatsApp wamid), and follow `planTransition`.
 */
export function planReceiptTransition(channel: Channel, current: AttemptState, target: AttemptState, ttlExpired = false): AttemptState[] | null {
  if (current !== 'sending' || target === 'sent' || CHANNEL_MODULES[channel].succeedsAt !== 'sent') {
    return planTransition(current, target, ttlExpired);
  }
  const rest = planTransition('sent', target, ttlExpired);
  return rest === null ? null : ['sent', ...rest];
}

/**
 * A `sent` that arrives after its attempt ended without reaching `sent`: the carrier took the
 * message before the failure it reported first. Meta and Viber do not keep their callbacks in
 * order, and reports queued after a batch that could not be applied are applied after later
 * ones. The attempt keeps its final state and its refund (credit is never taken back after a
 * refund); the `sent` is reported once, as late reports are (D3), and recorded (`reached_sent`,
 * `sent_at`). Only for channels whose step succeeds later than `sent` (Viber, WhatsApp): for SMS
 * `sent` is success, and one after a failure (and its fallback) would read as one; an SMPP
 * hand-over reports its parts in order, so none arrives late there. Pure.
 */
export function isLateSent(channel: Channel, current: AttemptState, target: AttemptState, reachedSent: boolean): boolean {
  return target === 'sent' && !reachedSent && isStepFailure(current) && CHANNEL_MODULES[channel].succeedsAt !== 'sent';
}

/** A step ends without success in these states and the flow moves to its next step (D3). */
export function isStepFailure(state: AttemptState): boolean {
  return state === 'undelivered' || state === 'rejected' || state === 'failed';
}

/**
 * D3: the flow moves on when its step ends without success: the attempt ends undelivered,
 * rejected or failed before it met its channel's condition. An SMS's condition is `sent`: an SMS
 * the carrier took has succeeded, so a later receipt saying undelivered (or rejected, failed) is
 * reported and ends it, but starts no other step (which would send, and charge, a second message).
 */
export function startsNextStep(channel: Channel, state: AttemptState, reachedSent: boolean): boolean {
  return isStepFailure(state) && !(reachedSent && isStepSuccess(channel, 'sent'));
}

/**
 * D3: an attempt is charged at hand-over and refunded when it ends without ever reaching `sent`:
 * `failed` or `rejected`, or `undelivered` by its carrier (not a user of the channel, no device,
 * outside the WhatsApp window: the carrier never took it). One that ran out of its ttl is not
 * refunded: the carrier had taken it and may still deliver it.
 */
export function isRefunded(state: AttemptState, reachedSent: boolean, byTtl: boolean): boolean {
  if (reachedSent) return false;
  return state === 'failed' || state === 'rejected' || (state === 'undelivered' && !byTtl);
}

/** The ttl timer fires: expire the attempt unless it already met its step's condition or ended. */
export function ttlExpiryApplies(channel: Channel, state: AttemptState): boolean {
  return !isStepSuccess(channel, state) && !FINAL_STATES.has(state);
}

/** D3 default ttl: 10 minutes for a step with a next step, 1440 for the last. */
export function defaultTtlMinutes(stepIndex: number, stepCount: number): number {
  return stepIndex < stepCount - 1 ? 10 : 1440;
}

/** A step's ttl in minutes: its own `ttl`, else the D3 default for its place in the flow. */
export function stepTtlMinutes(flow: readonly FlowStep[], stepIndex: number): number {
  const step = flow[stepIndex];
  return (step ? stepOf(step).config.ttl : undefined) ?? defaultTtlMinutes(stepIndex, flow.length);
}

/** `result_info` when the carrier gave none (spec Events examples). */
export function defaultResultInfo(state: AttemptState): string {
  switch (state) {
    case 'sending':
      return 'Sending';
    case 'sent':
      return 'Sent';
    case 'delivered':
      return '[0] Delivered';
    case 'seen':
      return '[0] Seen';
    case 'undelivered':
      return '[1] Undelivered';
    case 'rejected':
      return '[2] Rejected';
    case 'failed':
      return '[3] Failed';
    default:
      return assertUnreachable(state);
  }
}
