/**
 * What Viber's answers mean for an attempt, as pure tables (docs/viber.md, "Status mapping").
 *
 * Official dialect: `send_message` always answers HTTP 200 and puts the outcome in `status`
 * (SRVC_* codes, channels.md 2.2). Classes:
 * - `unreachable`: this person cannot get the message on Viber now (not a user, no device,
 *   blocked us, session limit): the step ends `undelivered` and the flow falls back at once (D3).
 * - `retry`: a transient fault at Viber; the same step is tried again inside its ttl.
 * - `config`: the service id, its account, billing or our caller address is wrong; no request
 *   will pass until an operator acts, so the connector warns once per sender.
 * - `request`: this request was malformed; sending it again would not help.
 * - `accepted`: 0, and 12 SRVC_ALREADY_SENT (Viber already has this `seq`: a re-hand after a lost
 *   answer must not count as a failure).
 *
 * Partner dialect (DecisionTelecom): errors are `{name, message, code, status}` bodies (`status`
 * repeats the HTTP status); status polls and callbacks carry a small status enum.
 *
 * `info` (the event's `result_info`) is `[<code>] <NAME>`.
 */
import { refusedOutcome, type ReceiptStatus, type RefusalClass, type SendOutcome } from '../http-carrier.js';

export type ViberCodeClass = 'accepted' | RefusalClass;

export interface ViberCode {
  name: string;
  class: ViberCodeClass;
}

/** Official SRVC statuses (channels.md 2.2, plus the media, list and carousel codes of the public connector). */
export const OFFICIAL_STATUSES: Readonly<Record<number, ViberCode>> = {
  0: { name: 'SRVC_SUCCESS', class: 'accepted' },
  1: { name: 'SRVC_INTERNAL_FAILURE', class: 'retry' },
  2: { name: 'SRVC_BAD_SERVICE_ID', class: 'config' },
  3: { name: 'SRVC_BAD_DATA', class: 'request' },
  4: { name: 'SRVC_BLOCKED_MESSAGE_TYPE', class: 'config' },
  5: { name: 'SRVC_BAD_MESSAGE_TYPE', class: 'request' },
  6: { name: 'SRVC_BAD_PARAMETERS', class: 'request' },
  7: { name: 'SRVC_TIMEOUT', class: 'retry' },
  8: { name: 'SRVC_USER_BLOCKED', class: 'unreachable' },
  9: { name: 'SRVC_NOT_VIBER_USER', class: 'unreachable' },
  10: { name: 'SRVC_NO_SUITABLE_DEVICE', class: 'unreachable' },
  11: { name: 'SRVC_UNAUTHORIZED_IP', class: 'config' },
  12: { name: 'SRVC_ALREADY_SENT', class: 'accepted' },
  13: { name: 'SRVC_NOT_PERMITTED', class: 'config' },
  14: { name: 'SRVC_BILLING_FAILURE', class: 'config' },
  17: { name: 'SRVC_NO_MORE_MESSAGES', class: 'config' },
  18: { name: 'SRVC_BAD_LABEL', class: 'request' },
  20: { name: 'SRVC_INVALID_TTL', class: 'request' },
  21: { name: 'SRVC_WAIT_FOR_USER_RESPONSE', class: 'unreachable' },
  27: { name: 'SRVC_INVALID_PHONE_NUMBER', class: 'request' },
  28: { name: 'SRVC_FILE_NOT_PERMITTED', class: 'request' },
  29: { name: 'SRVC_BAD_FILE_NAME_LENGTH', class: 'request' },
  30: { name: 'SRVC_BAD_THUMBNAIL', class: 'request' },
  31: { name: 'SRVC_BAD_FILE_SIZE', class: 'request' },
  32: { name: 'SRVC_BAD_DURATION', class: 'request' },
  38: { name: 'TEMPLATE_NOT_FOUND', class: 'config' },
  39: { name: 'TEMPLATE_VALIDATION_ERROR', class: 'request' },
  40: { name: 'SRVC_SURVEY_VALIDATION_ERROR', class: 'request' },
  41: { name: 'SRVC_CAROUSEL_VALIDATION_ERROR', class: 'request' },
  43: { name: 'SRVC_SERVICE_BLOCKED', class: 'config' },
  // One connector documents 401 for the caller-address case instead of 11.
  401: { name: 'SRVC_UNAUTHORIZED_IP', class: 'config' },
};

/** Unknown codes are refused for good as request faults: retrying an unknown answer could repeat forever. */
export function officialStatus(code: number): ViberCode {
  return OFFICIAL_STATUSES[code] ?? { name: 'SRVC_UNKNOWN_STATUS', class: 'request' };
}

export function officialInfo(code: number): string {
  return `[${code}] ${officialStatus(code).name}`;
}

/**
 * The outcome of a `send_message` answer's `status`. `messageToken` is needed for the accepted
 * codes; 12 without a token is still accepted with an empty `carrierRef` (the first send's answer,
 * which was lost, had it; the connector must keep whatever ref it already stored).
 */
export function officialOutcome(code: number, messageToken: string | undefined): SendOutcome {
  const entry = officialStatus(code);
  if (entry.class === 'accepted') return { kind: 'accepted', carrierRef: messageToken ?? '' };
  return refusedOutcome(entry.class, code, `[${code}] ${entry.name}`);
}

/**
 * Error classes by HTTP status, for answers that are not the carrier's normal ones (the partner
 * dialect's errors, a proxy in front of the official API): 401/402/403 are configuration (bad key,
 * empty balance, refused caller), 429 and 5xx are retried, other 4xx are request faults; anything
 * else (3xx, odd 1xx/2xx) is a proxy's doing and retried.
 */
export function httpErrorClass(httpStatus: number): Exclude<ViberCodeClass, 'accepted' | 'unreachable'> {
  if (httpStatus === 401 || httpStatus === 402 || httpStatus === 403) return 'config';
  if (httpStatus === 429 || httpStatus >= 500) return 'retry';
  if (httpStatus >= 400) return 'request';
  return 'retry';
}

/** Names for error answers that came without a body naming them (partner names where it has them). */
export const HTTP_ERROR_NAMES: Readonly<Record<number, string>> = {
  400: 'Invalid Parameter',
  401: 'Unauthorized',
  402: 'Topup balance is required',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal server error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/**
 * The outcome of an error answer by its HTTP status (partner: also the body's `status`); `info` is
 * `[<status>] <name>`, the body's name when it gave one. `afterMs` is kept for retries (Retry-After).
 */
export function httpErrorOutcome(httpStatus: number, name: string | undefined, afterMs?: number): SendOutcome {
  const info = `[${httpStatus}] ${name && name.length > 0 ? name : HTTP_ERROR_NAMES[httpStatus] ?? `HTTP ${httpStatus}`}`;
  return refusedOutcome(httpErrorClass(httpStatus), httpStatus, info, afterMs);
}

/**
 * A 2xx answer we cannot read. Refused rather than retried: the carrier may have taken the
 * message, and a retry would send it twice.
 */
export function unreadableAnswer(httpStatus: number, why: string): SendOutcome {
  return { kind: 'failed', code: httpStatus, info: `[${httpStatus}] Unreadable answer: ${why}`, config: false };
}

export interface PartnerStatus {
  name: string;
  /** The receipt it makes; null = still in progress or unknown, no event. */
  receipt: ReceiptStatus | null;
}

/** Partner status poll / callback codes. */
export const PARTNER_STATUSES: Readonly<Record<number, PartnerStatus>> = {
  0: { name: 'Sent', receipt: 'sent' },
  1: { name: 'Delivered', receipt: 'delivered' },
  2: { name: 'Error', receipt: 'failed' },
  3: { name: 'Rejected', receipt: 'failed' },
  4: { name: 'Undelivered', receipt: 'undelivered' },
  5: { name: 'Pending', receipt: null },
  20: { name: 'Unknown', receipt: null },
};

export function partnerInfo(code: number): string {
  return `[${code}] ${PARTNER_STATUSES[code]?.name ?? 'Unknown'}`;
}
