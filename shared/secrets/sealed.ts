/**
 * Carrier credentials at rest (D12), and the other secrets we keep (row-secrets.ts,
 * service-secrets.ts): sealed with AES-256-GCM under CREDENTIALS_KEY, which lives
 * only in the environment, so a copy of the database alone reveals none of them. Each sealed value
 * is bound to the row it belongs to (the additional data names it), so sealed bytes copied to
 * another row do not open there.
 *
 * Layout: version byte (1) | 12-byte nonce | 16-byte tag | ciphertext of the JSON object.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

const VERSION = 1;

export class SealedError extends Error {
  override name = 'SealedError';
}

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new RangeError('a credentials key has 32 bytes');
  }

  seal(secrets: Record<string, string>, boundTo: string): Buffer {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(boundTo, 'utf8'));
    const body = Buffer.concat([cipher.update(JSON.stringify(secrets), 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), body]);
  }

  open(sealed: Buffer, boundTo: string): Record<string, string> {
    if (sealed.length < 29 || sealed[0] !== VERSION) throw new SealedError('sealed credentials in an unknown format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(1, 13));
    decipher.setAAD(Buffer.from(boundTo, 'utf8'));
    decipher.setAuthTag(sealed.subarray(13, 29));
    try {
      const text = Buffer.concat([decipher.update(sealed.subarray(29)), decipher.final()]).toString('utf8');
      return JSON.parse(text) as Record<string, string>;
    } catch {
      throw new SealedError('sealed credentials do not open with CREDENTIALS_KEY (another key, or the bytes were changed)');
    }
  }

  /** A value that tells whether another process (or a later start) holds the same key, revealing nothing of it. */
  fingerprint(): Buffer {
    return createHmac('sha256', this.key).update('switchboard credentials key check v1').digest();
  }
}
