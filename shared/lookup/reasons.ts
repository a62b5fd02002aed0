/**
 * Why an attempt ended without success, from its state and `result_info` (issue 27): the reason a
 * flow fell back to its next step, or stopped. A pure function over the texts the engine and the
 * connectors write (D3, sandbox D10, Viber SRVC codes, WhatsApp error codes).
 */
import type { AttemptState } from '../channels/index.js';

export const END_REASONS = [
  'ttl_expired', 'not_a_user', 'outside_whatsapp_window', 'insufficient_credit', 'opted_out', 'no_route', 'invalid_number',
  'undelivered', 'rejected', 'failed',
] as const;
export type EndReason = (typeof END_REASONS)[number];

/** Known texts first, most specific first; the state itself when none matches. */
const RULES: ReadonlyArray<[RegExp, EndReason]> = [
  [/TTL expired/i, 'ttl_expired'],
  // The sandbox's "Not a Viber user", Viber's SRVC_NOT_VIBER_USER / SRVC_NO_SUITABLE_DEVICE.
  [/not an? [\w ]*user|NOT_VIBER_USER|NO_SUITABLE_DEVICE/i, 'not_a_user'],
  // WhatsApp 131047 "Re-engagement message": free text more than 24 hours after the person's last message.
  [/\[131047\]|re-engagement|24[- ]hour|customer[- ]service window|outside the [\w -]*window/i, 'outside_whatsapp_window'],
  [/^\[307\]/, 'insufficient_credit'],
  [/^\[304\]/, 'opted_out'],
  [/^\[303\]/, 'no_route'],
  [/^\[302\]/, 'invalid_number'],
];

/** The reason an attempt in `state` ended without success; null while it may still succeed or when it did. */
export function endReason(state: AttemptState, resultInfo: string): EndReason | null {
  if (state !== 'undelivered' && state !== 'rejected' && state !== 'failed') {
    return null;
  }
  for (const [pattern, reason] of RULES) {
    if (pattern.test(resultInfo)) {
      return reason;
    }
  }
  return state;
}
