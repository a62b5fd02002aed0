/**
 * Input checks shared by the REST API operations (issue 6, D6). Every problem is a 400 AppError
 * whose message starts with the field it is about (`default_callback_url: ...`), so a client can
 * tell what to fix; nothing a client sends can reach Postgres in a form that makes it fail.
 */
import { badRequest } from '../errors.js';
import { checkCallbackUrl, MAX_CALLBACK_URL_LENGTH } from '../net/ssrf.js';
import { isValidWebhookSecret } from '../webhooks/sign.js';

/** Control characters (NUL in particular, which Postgres text refuses) are never accepted in a string. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export const MAX_NOTE_LENGTH = 255;
export const MAX_WEBHOOK_SECRET_LENGTH = 512;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The body must be a JSON object holding only `allowed` fields; every unknown field is named. */
export function requireObject(body: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (!isPlainObject(body)) {
    throw badRequest('body: must be a JSON object');
  }
  const unknown = Object.keys(body).filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    throw badRequest(`${unknown.join(', ')}: ${unknown.length === 1 ? 'is not an allowed field' : 'are not allowed fields'} (allowed: ${allowed.join(', ')})`,
      'VALIDATION', { fields: unknown });
  }
  return body;
}

export function hasField(body: Record<string, unknown>, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(body, name) && body[name] !== undefined;
}

/** A callback URL: http(s), at most 2048 characters, and (unless allowed) no private or loopback host (D4). */
export function checkUrlField(field: string, value: unknown, allowPrivate: boolean): string {
  if (typeof value !== 'string') {
    throw badRequest(`${field}: must be a string`);
  }
  if (value.length > MAX_CALLBACK_URL_LENGTH) {
    throw badRequest(`${field}: URL is longer than ${MAX_CALLBACK_URL_LENGTH} characters`);
  }
  if (CONTROL.test(value) || /\s/.test(value)) {
    throw badRequest(`${field}: URL must not contain spaces or control characters`);
  }
  const policy = checkCallbackUrl(value, allowPrivate);
  if (!policy.ok) {
    throw badRequest(`${field}: ${policy.reason}`);
  }
  return value;
}

/** `null` or `""` clears the URL; anything else must pass `checkUrlField`. */
export function optionalUrl(field: string, value: unknown, allowPrivate: boolean): string | null {
  return value === null || value === '' ? null : checkUrlField(field, value, allowPrivate);
}

/** A note: a string of at most 255 characters without control characters; null counts as "". */
export function checkNote(value: unknown): string {
  if (value === null) {
    return '';
  }
  if (typeof value !== 'string') {
    throw badRequest('note: must be a string');
  }
  if (value.length > MAX_NOTE_LENGTH) {
    throw badRequest(`note: must be at most ${MAX_NOTE_LENGTH} characters`);
  }
  if (CONTROL.test(value)) {
    throw badRequest('note: must not contain control characters');
  }
  return value;
}

/** `whsec_` + base64 of at least 24 bytes (D4); `null` or `""` clears it (events are then unsigned). */
export function checkWebhookSecret(value: unknown): string | null {
  if (value === null || value === '') {
    return null;
  }
  if (typeof value !== 'string') {
    throw badRequest('webhook_secret: must be a string');
  }
  if (value.length > MAX_WEBHOOK_SECRET_LENGTH || !isValidWebhookSecret(value)) {
    throw badRequest('webhook_secret: must be "whsec_" followed by standard base64 of at least 24 random bytes');
  }
  return value;
}

/** A short text filter from the query string (tag, phone number). */
export function checkQueryText(field: string, value: string, max: number): string {
  if (value.length === 0) {
    throw badRequest(`${field}: must not be empty`);
  }
  if (value.length > max) {
    throw badRequest(`${field}: must be at most ${max} characters`);
  }
  if (CONTROL.test(value)) {
    throw badRequest(`${field}: must not contain control characters`);
  }
  return value;
}

/** A query string may hold only `allowed` parameters; every unknown one is named in the 400. */
export function refuseUnknownParams(query: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(query).filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    const known = allowed.length > 0 ? `allowed: ${allowed.join(', ')}` : 'this endpoint takes none';
    throw badRequest(`${unknown.join(', ')}: unknown query parameter${unknown.length > 1 ? 's' : ''} (${known})`);
  }
}

/** A query parameter given at most once. */
export function singleParam(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== 'string') {
    throw badRequest(`${name}: must be given once`);
  }
  return value;
}

/** `limit`: rows per page, 1 to `max`. */
export function limitParam(value: string, max: number): number {
  if (!/^\d{1,7}$/.test(value) || Number(value) < 1 || Number(value) > max) {
    throw badRequest(`limit: must be an integer from 1 to ${max}`);
  }
  return Number(value);
}
