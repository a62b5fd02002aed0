/**
 * What the Viber connector tells the engine, as pure functions (table-tested in
 * test/unit/viber-reports.test.ts):
 *
 * - `decideSend`: the outcome of one send request → the attempt's report, or a retry of the same
 *   attempt inside its step's ttl. Accepted: `sent`, registering the carrier's id (message_token /
 *   message_id) against the attempt. Unreachable (not a user, no device, blocked, session limit):
 *   `undelivered` at once, which the engine refunds (the attempt never reached `sent`) and falls
 *   back from. Configuration and request faults: `failed`. Retryable faults: tried again with
 *   exponential backoff while the next try still falls inside the ttl, else `failed` with the last
 *   fault (Viber never took the message, so the engine refunds it and moves on at once rather than
 *   waiting for the ttl timer).
 * - `callbackReports`: a callback's events → status reports and inbound messages. Receipts name
 *   the attempt by our tracking data when the dialect echoes it (official), else by the carrier's
 *   id registered at acceptance (partner). Replies name the message they answer the same way.
 *   A receipt can reach the engine before the send's own `sent` report (another process, a slow
 *   batch): a failure receipt by tracking data therefore brings its `sent` along.
 */
import type { InboundReport, StatusReport } from '../types.js';
import type { CallbackEvent, SendOutcome } from '../http-carrier.js';

/** `result_info` of an attempt Viber (or the partner) took. */
export const VIBER_SENT_INFO = 'Sent';

/** Backoff of retryable faults: `base` × 2^tries, at most `max`, ±20 % jitter. */
export interface RetryPolicy {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { baseMs: 500, maxMs: 30_000 };

export function retryDelayMs(tries: number, policy: RetryPolicy, random: number, afterMs?: number): number {
  if (afterMs !== undefined && afterMs > 0) return Math.round(afterMs);
  const plain = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(tries, 30));
  return Math.round(plain * (0.8 + 0.4 * random));
}

export interface SendContext {
  attemptId: number;
  /** The connection's carrier name (`viber.<connection>`): refs are registered under it. */
  carrier: string;
  /** Retries made so far for this attempt (0 on its first send). */
  tries: number;
  now: number;
  /** Unix ms by which the step's ttl ends: no retry is started that would not be answered by then. */
  deadline: number;
  policy: RetryPolicy;
  /** In [0, 1): the jitter (Math.random in production). */
  random: number;
}

export type SendDecision =
  | { kind: 'report'; report: StatusReport; warn?: 'config' | 'request' }
  | { kind: 'retry'; delayMs: number; info: string; throttled: boolean };

/** The margin a retry keeps before the deadline (the request itself takes time). */
const RETRY_MARGIN_MS = 1_000;

export function decideSend(outcome: SendOutcome, ctx: SendContext): SendDecision {
  const base = { attemptId: ctx.attemptId, at: ctx.now };
  switch (outcome.kind) {
    case 'accepted':
      // 12 SRVC_ALREADY_SENT may come without the token: the first answer's registration stands
      // (official receipts name the attempt by tracking data anyway).
      return {
        kind: 'report',
        report: outcome.carrierRef === ''
          ? { ...base, state: 'sent', resultInfo: VIBER_SENT_INFO }
          : { ...base, carrier: ctx.carrier, ref: outcome.carrierRef, state: 'sent', resultInfo: VIBER_SENT_INFO },
      };
    case 'unreachable':
      return { kind: 'report', report: { ...base, state: 'undelivered', resultInfo: outcome.info } };
    case 'failed':
      return { kind: 'report', report: { ...base, state: 'failed', resultInfo: outcome.info }, warn: outcome.config ? 'config' : 'request' };
    case 'retry': {
      const delayMs = retryDelayMs(ctx.tries, ctx.policy, ctx.random, outcome.afterMs);
      if (ctx.now + delayMs + RETRY_MARGIN_MS > ctx.deadline) {
        return { kind: 'report', report: { ...base, state: 'failed', resultInfo: outcome.info } };
      }
      return { kind: 'retry', delayMs, info: outcome.info, throttled: outcome.afterMs !== undefined || outcome.code === 429 };
    }
  }
}

/** Our tracking data (the attempt id as decimal text) → the attempt id, or null when it is not one of ours. */
export function attemptIdOfRef(ref: string | undefined): number | null {
  if (ref === undefined || !/^[1-9]\d{0,15}$/.test(ref)) return null;
  const n = Number(ref);
  return Number.isSafeInteger(n) ? n : null;
}

const RECEIPT_INFO = {
  sent: VIBER_SENT_INFO,
  delivered: '[0] Delivered',
  seen: '[0] Seen',
  expired: '[1] Expired',
  undelivered: '[1] Undelivered',
  failed: '[2] Failed',
} as const;

export interface CallbackContext {
  carrier: string;
  /** The sender name registered for what received an inbound message (service id / source name); itself when none is. */
  recipientOf(to: string): string;
}

/** A callback's events as the engine's reports and inbound messages. */
export function callbackReports(events: readonly CallbackEvent[], ctx: CallbackContext): { reports: StatusReport[]; inbound: InboundReport[] } {
  const reports: StatusReport[] = [];
  const inbound: InboundReport[] = [];
  for (const e of events) {
    if (e.kind === 'receipt') {
      // Viber's own expiry ends the step like our ttl would: undelivered, and the flow moves on.
      const state = e.status === 'expired' ? 'undelivered' : e.status;
      const resultInfo = e.info ?? RECEIPT_INFO[e.status];
      const attemptId = attemptIdOfRef(e.ourRef);
      if (attemptId === null) {
        // By the token: applied only once the token's registration (with its `sent`) is.
        reports.push({ carrier: ctx.carrier, ref: e.carrierRef, state, resultInfo, at: e.at });
        continue;
      }
      // By tracking data the receipt may overtake the send's own report: a message that expired
      // or failed was taken first, so it passes `sent` (charged, not refunded; the event is
      // reported). `delivered` and `seen` pass it anyway (planTransition).
      if (state === 'undelivered' || state === 'failed') reports.push({ attemptId, carrier: ctx.carrier, state: 'sent', resultInfo: VIBER_SENT_INFO, at: e.at });
      reports.push({ attemptId, carrier: ctx.carrier, state, resultInfo, at: e.at });
      continue;
    }
    if (e.from === undefined) continue; // Viber always gives the number; nothing to attribute without it
    const message: InboundReport = { gateway: 'viber', sender: e.from, recipient: ctx.recipientOf(e.to), body: e.text, at: e.at };
    const attemptId = attemptIdOfRef(e.replyToOurRef);
    if (attemptId !== null) message.replyTo = { attemptId };
    else if (e.replyToCarrierRef !== undefined) message.replyTo = { carrier: ctx.carrier, ref: e.replyToCarrierRef };
    inbound.push(message);
  }
  return { reports, inbound };
}
