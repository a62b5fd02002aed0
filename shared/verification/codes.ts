/**
 * One-time codes (D8): 6 digits from the CSPRNG, stored only as a keyed hash bound to the token
 * (equal codes of two sessions hash differently), compared in constant time. An AES-256-GCM copy,
 * also bound to the token, exists only until the SMS is handed to the carrier.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

export const CODE_LENGTH = 6;
export const CODE_PATTERN = /^\d{6}$/;
/** What stored texts show instead of the code. */
export const CODE_MASK = '******';
export const CODE_PLACEHOLDER = '{code}';

export function generateCode(): string {
  return String(randomInt(0, 10 ** CODE_LENGTH)).padStart(CODE_LENGTH, '0');
}

/** HMAC-SHA256(key, token "|" code). */
export function hashCode(key: Buffer, token: string, code: string): Buffer {
  return createHmac('sha256', key).update(`${token}|${code}`, 'utf8').digest();
}

/** Constant-time check of a submitted code against the stored hash. */
export function codeMatches(key: Buffer, token: string, code: string, stored: Buffer): boolean {
  const candidate = hashCode(key, token, code);
  return stored.length === candidate.length && timingSafeEqual(candidate, stored);
}

const ENC_VERSION = 'v1';

/** `v1.<base64url(iv | tag | ciphertext)>`, the token as associated data. */
export function encryptCode(key: Buffer, token: string, code: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(token, 'utf8'));
  const ct = Buffer.concat([cipher.update(code, 'utf8'), cipher.final()]);
  return `${ENC_VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url')}`;
}

/** The code, or null when the copy is malformed, tampered with or belongs to another token. */
export function decryptCode(key: Buffer, token: string, enc: string): string | null {
  const [version, data, ...rest] = enc.split('.');
  if (version !== ENC_VERSION || data === undefined || rest.length > 0) {
    return null;
  }
  const raw = Buffer.from(data, 'base64url');
  if (raw.length < 12 + 16 + 1) {
    return null;
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(token, 'utf8'));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/** The account template with every `{code}` replaced. */
export function fillTemplate(template: string, code: string): string {
  return template.split(CODE_PLACEHOLDER).join(code);
}

/** The template as stored texts show it: the code masked. */
export function maskedTemplate(template: string): string {
  return fillTemplate(template, CODE_MASK);
}
