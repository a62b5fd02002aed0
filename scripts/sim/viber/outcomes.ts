/**
 * The Viber simulator's outcome table (channels.md section 3, docs/viber.md "Simulator"), chosen
 * by the recipient's last two digits, as pure functions. Delays are relative to the send.
 *
 * | ends in | official                                   | partner                              |
 * |---------|--------------------------------------------|--------------------------------------|
 * | other   | 0; delivered, seen                         | accepted; 1 Delivered                |
 * | 01      | 0; expired (after ttl or expireAfterMs)    | accepted; 4 Undelivered (same time)  |
 * | 02      | status 1 SRVC_INTERNAL_FAILURE             | HTTP 500 (code 2)                    |
 * | 03      | 0; no callbacks                            | accepted; no callbacks               |
 * | 04      | status 9 SRVC_NOT_VIBER_USER               | accepted; 4 Undelivered              |
 * | 05      | status 8 SRVC_USER_BLOCKED                 | accepted; 3 Rejected                 |
 * | 06      | status 10 SRVC_NO_SUITABLE_DEVICE          | accepted; 2 Error                    |
 * | 07      | status 21 SRVC_WAIT_FOR_USER_RESPONSE      | HTTP 429 (code 0)                    |
 * | 08      | 0; delivered on two devices, then seen     | accepted; 1 Delivered twice          |
 * | 09      | status 13 SRVC_NOT_PERMITTED               | HTTP 402 (code 3)                    |
 * | 10      | 0; seen without delivered                  | accepted; 1 Delivered                |
 *
 * The partner dialect reports unreachable people through callbacks (it has no synchronous
 * "not a Viber user"), and has no seen status.
 */

export interface SimTiming {
  /** Delay of the first callback; later ones follow at 1.5x and 2x. */
  callbackDelayMs: number;
  /** Expiry of suffix 01: after the message's ttl or this, whichever comes first. */
  expireAfterMs: number;
}

export type OfficialReceipt = 'delivered' | 'seen' | 'expired';

export interface OfficialScript {
  /** The `status` of the send answer. */
  status: number;
  receipts: Array<{ afterMs: number; event: OfficialReceipt; device?: string }>;
}

export function officialScript(dest: string, ttlSeconds: number, t: SimTiming): OfficialScript {
  const d = t.callbackDelayMs;
  switch (dest.slice(-2)) {
    case '01':
      return { status: 0, receipts: [{ afterMs: Math.min(ttlSeconds * 1000, t.expireAfterMs), event: 'expired' }] };
    case '02':
      return { status: 1, receipts: [] };
    case '03':
      return { status: 0, receipts: [] };
    case '04':
      return { status: 9, receipts: [] };
    case '05':
      return { status: 8, receipts: [] };
    case '06':
      return { status: 10, receipts: [] };
    case '07':
      return { status: 21, receipts: [] };
    case '08':
      return {
        status: 0,
        receipts: [
          { afterMs: d, event: 'delivered', device: 'phone' },
          { afterMs: Math.round(d * 1.5), event: 'delivered', device: 'desktop' },
          { afterMs: d * 2, event: 'seen', device: 'phone' },
        ],
      };
    case '09':
      return { status: 13, receipts: [] };
    case '10':
      return { status: 0, receipts: [{ afterMs: d, event: 'seen', device: 'phone' }] };
    default:
      return { status: 0, receipts: [{ afterMs: d, event: 'delivered', device: 'phone' }, { afterMs: d * 2, event: 'seen', device: 'phone' }] };
  }
}

export interface PartnerError {
  httpStatus: number;
  name: string;
  message: string;
  code: number;
}

export const PARTNER_SIM_ERRORS = {
  internal: { httpStatus: 500, name: 'Internal server error', message: 'The server encountered an unexpected condition which prevented it from fulfilling the request', code: 2 },
  rateLimit: { httpStatus: 429, name: 'Too Many Requests', message: 'Rate limit exceeded', code: 0 },
  balance: { httpStatus: 402, name: 'Topup balance is required', message: 'User balance is empty', code: 3 },
} as const satisfies Record<string, PartnerError>;

export interface PartnerScript {
  /** Refused at once with this error, or accepted (null). */
  error: PartnerError | null;
  /** Status changes posted to the callback URL. */
  statuses: Array<{ afterMs: number; status: number }>;
}

export function partnerScript(dest: string, validitySeconds: number, t: SimTiming): PartnerScript {
  const d = t.callbackDelayMs;
  const accepted = (statuses: PartnerScript['statuses']): PartnerScript => ({ error: null, statuses });
  switch (dest.slice(-2)) {
    case '01':
      return accepted([{ afterMs: Math.min(validitySeconds * 1000, t.expireAfterMs), status: 4 }]);
    case '02':
      return { error: PARTNER_SIM_ERRORS.internal, statuses: [] };
    case '03':
      return accepted([]);
    case '04':
      return accepted([{ afterMs: d, status: 4 }]);
    case '05':
      return accepted([{ afterMs: d, status: 3 }]);
    case '06':
      return accepted([{ afterMs: d, status: 2 }]);
    case '07':
      return { error: PARTNER_SIM_ERRORS.rateLimit, statuses: [] };
    case '08':
      return accepted([{ afterMs: d, status: 1 }, { afterMs: Math.round(d * 1.5), status: 1 }]);
    case '09':
      return { error: PARTNER_SIM_ERRORS.balance, statuses: [] };
    default:
      return accepted([{ afterMs: d, status: 1 }]);
  }
}
