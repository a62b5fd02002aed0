/**
 * What both Viber dialects share: one message to one person in carrier-neutral terms, the HTTP
 * request a dialect builds from it, the adapter shape, and Viber's own limits.
 */
import type { CallbackEvent, SendOutcome } from '../http-carrier.js';

export type ViberDialect = 'official' | 'partner';
export const VIBER_DIALECTS: readonly ViberDialect[] = ['official', 'partner'];

/** Viber's text limit (the spec's too). */
export const VIBER_TEXT_MAX = 1000;
/** Viber's button caption limit; the spec allows 100 characters, Viber shows at most 30. */
export const VIBER_BUTTON_TITLE_MAX = 30;

/** One message to one recipient. */
export interface ViberSendInput {
  /** E.164 digits, no `+`. */
  to: string;
  /** At most 1000 characters (checked at acceptance). */
  text: string;
  button?: { title: string; url: string };
  /** The step's ttl in seconds; each dialect clamps it to its own range. */
  ttlSeconds: number;
  /** Promotional (marketing) rather than transactional traffic. */
  promotional: boolean;
  /** Our per-recipient reference: official `#tracking_data`, echoed on receipts and replies. */
  ourRef: string;
  /** Official: the service id (integer, or its decimal string); partner: the source name. */
  sender: number | string;
  /**
   * Official only: the request's `seq`. Pass a number that is unique per attempt and stable across
   * re-hands (the attempt id) so Viber can answer 12 SRVC_ALREADY_SENT for a repeat; when absent a
   * process-wide counter is used.
   */
  seq?: number;
  /** Partner only: the connection's API key (Basic auth). */
  credentials?: { apiKey: string };
  /** Partner only: where the partner POSTs this message's status changes (the connection's callback URL with its token). */
  callbackUrl?: string;
}

/** The request a dialect sends; `path` is below the connection's base URL. */
export interface ViberHttpRequest {
  method: 'POST';
  path: string;
  headers: Record<string, string>;
  json: Record<string, unknown>;
}

/** Input a dialect cannot send (a sender that is not a service id, no API key): a configuration fault. */
export class ViberInputError extends Error {
  override name = 'ViberInputError';
}

/** One dialect's translation, the same shape for each. */
export interface ViberAdapter {
  readonly dialect: ViberDialect;
  /** Throws ViberInputError when the input cannot be sent with this dialect. */
  buildSend(input: ViberSendInput): ViberHttpRequest;
  /** The outcome of the send answer; never throws. */
  parseSendResponse(status: number, body: unknown, headers?: Record<string, string | string[] | undefined>): SendOutcome;
  /** The events of one callback body (parsed JSON); never throws; malformed → `{error}` naming the field. */
  parseCallback(body: unknown, now?: number): CallbackEvent[] | { error: string };
  /** The ttl this dialect sends for a step ttl in seconds. */
  clampTtl(seconds: number): number;
}

/**
 * Why Viber cannot show this button title, or null when it can: the acceptance path calls it for
 * `viber.buttons[0].title` (the spec allows 100 characters; Viber shows at most 30). Characters
 * are counted as Unicode code points.
 */
export function viberButtonTitleProblem(title: string): string | null {
  const length = [...title].length;
  if (length === 0) return 'must not be empty';
  if (length > VIBER_BUTTON_TITLE_MAX) return `must be at most ${VIBER_BUTTON_TITLE_MAX} characters for Viber (has ${length})`;
  return null;
}

/** `seconds` rounded and clamped into [min, max]; not-a-number → max. */
export function clampSeconds(seconds: number, min: number, max: number): number {
  if (!Number.isFinite(seconds)) return max;
  return Math.min(max, Math.max(min, Math.round(seconds)));
}

/** Shared shape checks for callback parsers: plain objects, their fields by name. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A carrier id given as a JSON number or string: its decimal text, or null when it is neither. */
export function idText(v: unknown): string | null {
  // Viber's 64-bit tokens can exceed 2^53: JSON.parse rounds them the same way in the send
  // answer and in callbacks, so the rounded number's text still matches; accept any integer.
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 1e21) return String(v);
  if (typeof v === 'string' && v.length > 0 && v.length <= 64) return v;
  return null;
}

/** The elements of a callback body: a single object or an array of them. */
export function callbackItems(body: unknown): unknown[] | { error: string } {
  if (Array.isArray(body)) return body;
  if (isObject(body)) return [body];
  return { error: 'body: must be a JSON object or an array of objects' };
}

/** Field path of element `i`, for error messages: `event` for a single object, `[2].event` in an array. */
export function fieldPath(body: unknown, i: number, field: string): string {
  return Array.isArray(body) ? `[${i}].${field}` : field;
}

/** `timestamp` as unix ms when given, else `now`; null when it is there but not a time. */
export function eventTime(v: unknown, now: number): number | null {
  if (v === undefined || v === null) return now;
  if (typeof v === 'number' && Number.isFinite(v) && v > 0) return Math.round(v);
  return null;
}
