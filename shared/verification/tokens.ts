/**
 * Validation tokens: `<accountId>.<random>.<mac>`.
 *  - accountId: decimal; lets POST /v1/verify-proof find the account's secret without a session.
 *  - random: 16 bytes from the CSPRNG, base64url (22 characters).
 *  - mac: the first 16 bytes of HMAC-SHA256(server token key, "<accountId>.<random>"), base64url.
 * A token edited to name another account fails the MAC, so it can never be forged into another
 * account's; the whole token is URL-safe (digits, letters, `-`, `_`, `.`).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const TOKEN_PATTERN = /^([1-9]\d{0,15})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{22})$/;
export const MAX_TOKEN_LENGTH = 80;

function tokenMac(key: Buffer, accountId: string, random: string): Buffer {
  return createHmac('sha256', key).update(`${accountId}.${random}`, 'utf8').digest().subarray(0, 16);
}

export function mintToken(key: Buffer, accountId: number): string {
  if (!Number.isSafeInteger(accountId) || accountId < 1) {
    throw new RangeError('accountId must be a positive integer');
  }
  const id = String(accountId);
  const random = randomBytes(16).toString('base64url');
  return `${id}.${random}.${tokenMac(key, id, random).toString('base64url')}`;
}

/** The account a token belongs to, or null when the token is malformed or its MAC does not match. */
export function parseToken(key: Buffer, token: unknown): { accountId: number } | null {
  if (typeof token !== 'string' || token.length > MAX_TOKEN_LENGTH) {
    return null;
  }
  const m = TOKEN_PATTERN.exec(token);
  if (!m) {
    return null;
  }
  const [, id, random, mac] = m as unknown as [string, string, string, string];
  const given = Buffer.from(mac, 'base64url');
  const expected = tokenMac(key, id, random);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return null;
  }
  const accountId = Number(id);
  return Number.isSafeInteger(accountId) ? { accountId } : null;
}
