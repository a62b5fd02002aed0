/**
 * `GET/POST /v1/suppressions`, `DELETE /v1/suppressions/{phone}` (issue 27): the account's
 * suppression list through the REST API. Numbers are read as when sending (D2, the account's
 * country); one that is not a possible number is a 400 naming the field. A family left out means
 * every family (sms, viber, whatsapp).
 */
import { FAMILIES, type Family } from '../channels/index.js';
import { badRequest } from '../errors.js';
import { normalizePhone } from '../phone/normalize.js';
import type { SuppressionQuery } from '../suppression/store.js';
import { checkQueryText, hasField, limitParam, refuseUnknownParams, requireObject, singleParam as single } from './input.js';

export const DEFAULT_SUPPRESSION_LIMIT = 100;
export const MAX_SUPPRESSION_LIMIT = 1000;
export const SUPPRESSION_QUERY_PARAMS = ['family', 'phone_number', 'cursor', 'limit'] as const;
export const SUPPRESSION_FIELDS = ['phone_number', 'family'] as const;
const MAX_PHONE_LENGTH = 64;

/** A number given by a client, in the stored form (E.164 digits), or a 400 naming `field`. */
export function suppressionPhone(field: string, value: unknown, country: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw badRequest(`${field}: is required (a phone number, e.g. 420777123456)`);
  }
  const raw = checkQueryText(field, value, MAX_PHONE_LENGTH);
  const e164 = normalizePhone(raw, country);
  if (e164 === null) {
    throw badRequest(`${field}: is not a valid phone number`);
  }
  return e164;
}

/** One family, or every family when none is given. */
export function suppressionFamilies(value: unknown): Family[] {
  if (value === undefined) {
    return [...FAMILIES];
  }
  if (typeof value !== 'string' || !(FAMILIES as readonly string[]).includes(value)) {
    throw badRequest(`family: must be one of ${FAMILIES.join(', ')}`);
  }
  return [value as Family];
}

/** The body of `POST /v1/suppressions`: `{phone_number, family?}`. */
export function parseNewSuppression(body: unknown, country: string): { phone: string; families: Family[] } {
  const input = requireObject(body, SUPPRESSION_FIELDS);
  return {
    phone: suppressionPhone('phone_number', hasField(input, 'phone_number') ? input.phone_number : undefined, country),
    families: suppressionFamilies(input.family),
  };
}

export function encodeSuppressionCursor(family: string, phone: string): string {
  return Buffer.from(`${family}|${phone}`, 'utf8').toString('base64url');
}

function decodeSuppressionCursor(value: string): { family: string; phone: string } {
  const [family, phone, ...rest] = value.length <= 100 ? Buffer.from(value, 'base64url').toString('utf8').split('|') : [];
  if (rest.length > 0 || family === undefined || phone === undefined || !(FAMILIES as readonly string[]).includes(family) || !/^\d{1,20}$/.test(phone)) {
    throw badRequest('cursor: is not a cursor returned by this API (use next_cursor as given)');
  }
  return { family, phone };
}

/** The query of `GET /v1/suppressions`; unknown parameters are named in the 400. */
export function parseSuppressionQuery(query: Record<string, unknown>, country: string): SuppressionQuery {
  refuseUnknownParams(query, SUPPRESSION_QUERY_PARAMS);
  const out: SuppressionQuery = { limit: DEFAULT_SUPPRESSION_LIMIT };
  const family = single(query, 'family');
  if (family !== undefined) {
    out.family = suppressionFamilies(family)[0]!;
  }
  const phone = single(query, 'phone_number');
  if (phone !== undefined) {
    out.phone = suppressionPhone('phone_number', phone, country);
  }
  const limit = single(query, 'limit');
  if (limit !== undefined) {
    out.limit = limitParam(limit, MAX_SUPPRESSION_LIMIT);
  }
  const cursor = single(query, 'cursor');
  if (cursor !== undefined && cursor !== '') {
    out.after = decodeSuppressionCursor(cursor);
  }
  return out;
}
