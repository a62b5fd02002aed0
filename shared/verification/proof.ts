/**
 * Verification proofs (D8): lowercase hex HMAC-SHA256, keyed by the account's verification secret
 * (its UTF-8 bytes), over the UTF-8 string `phoneNumber|token|code|timestamp`, where `timestamp` is
 * the session's start timestamp exactly as the API returned it (ISO 8601 UTC with milliseconds).
 * A proof is valid for 24 hours after that timestamp.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const PROOF_VALIDITY_MS = 24 * 3600 * 1000;
const PROOF_PATTERN = /^[0-9a-f]{64}$/;

export interface ProofInput {
  phoneNumber: string;
  token: string;
  code: string;
  timestamp: string;
}

export function proofMessage(p: ProofInput): string {
  return `${p.phoneNumber}|${p.token}|${p.code}|${p.timestamp}`;
}

export function computeProof(secret: string, p: ProofInput): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(proofMessage(p), 'utf8').digest('hex');
}

/** Constant-time comparison of a presented proof with the expected one (exact lowercase hex). */
export function proofMatches(secret: string, p: ProofInput, proof: string): boolean {
  if (!PROOF_PATTERN.test(proof)) {
    return false;
  }
  const expected = Buffer.from(computeProof(secret, p), 'utf8');
  const given = Buffer.from(proof, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** True when the proof's timestamp is more than 24 h old (or not a timestamp at all). */
export function proofExpired(timestamp: string | Date, now: Date): boolean {
  const at = timestamp instanceof Date ? timestamp.getTime() : Date.parse(timestamp);
  return !Number.isFinite(at) || now.getTime() - at > PROOF_VALIDITY_MS;
}

export type ProofCheck = { valid: true } | { valid: false; expired?: true };

/**
 * Offline check: the HMAC first (a wrong proof is just invalid), then the age (a genuine but old
 * proof answers `{valid: false, expired: true}`).
 */
export function checkProof(secret: string | null, p: ProofInput, proof: string, now = new Date()): ProofCheck {
  if (!secret || !proofMatches(secret, p, proof)) {
    return { valid: false };
  }
  if (proofExpired(p.timestamp, now)) {
    return { valid: false, expired: true };
  }
  return { valid: true };
}
