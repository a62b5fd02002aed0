/**
 * Standard Webhooks signing (https://www.standardwebhooks.com).
 *
 * Secret: `whsec_` + base64 of >= 24 random bytes; the HMAC key is the
 * base64-decoded part after the prefix. Signature header: `v1,<base64 HMAC-SHA256
 * of "${msgId}.${timestampSec}.${body}">`.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
export const MIN_WEBHOOK_SECRET_BYTES = 24;

export interface WebhookSignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Decodes the key part of a `whsec_` secret, or returns null when malformed. */
function decodeSecret(secret: string): Buffer | null {
  if (typeof secret !== 'string' || !secret.startsWith(WEBHOOK_SECRET_PREFIX)) return null;
  const b64 = secret.slice(WEBHOOK_SECRET_PREFIX.length);
  if (b64.length === 0 || !BASE64_RE.test(b64)) return null;
  return Buffer.from(b64, 'base64');
}

/** `whsec_` + base64(32 random bytes). */
export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** `whsec_` prefix, valid (padded, standard-alphabet) base64, >= 24 decoded bytes. */
export function isValidWebhookSecret(s: string): boolean {
  const key = decodeSecret(s);
  return key !== null && key.length >= MIN_WEBHOOK_SECRET_BYTES;
}

export function signWebhook(
  secret: string,
  msgId: string,
  timestampSec: number,
  body: string,
): WebhookSignatureHeaders {
  const key = decodeSecret(secret);
  if (key === null || key.length < MIN_WEBHOOK_SECRET_BYTES) {
    throw new Error('invalid webhook secret');
  }
  if (!Number.isSafeInteger(timestampSec) || timestampSec < 0) {
    throw new Error('webhook timestamp must be a non-negative integer (seconds)');
  }
  const ts = String(timestampSec);
  const mac = createHmac('sha256', key).update(`${msgId}.${ts}.${body}`, 'utf8').digest('base64');
  return { 'webhook-id': msgId, 'webhook-timestamp': ts, 'webhook-signature': `v1,${mac}` };
}
