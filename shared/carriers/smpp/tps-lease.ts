/**
 * The arithmetic of the throughput cap's leases (see token-bucket.ts), as pure functions: the
 * shape of the cap for a `tps`, how many tokens a process asks for next, and when it asks for
 * the next lease while still spending the current one.
 */

/** A lease asks for at most this share of a second's budget. */
const MAX_LEASE_SHARE = 0.1;
/** A lease is sized to last about this long at the demand the previous one saw. */
export const LEASE_HORIZON_MS = 250;

export interface CapShape {
  /** Tokens allowed in any window. */
  budget: number;
  /** Window length in ms: one second (or 1/tps seconds below one token a second) plus the guard. */
  windowMs: number;
  /** Pacing interval per token in µs (1e6 / tps). */
  intervalUs: number;
  /** Most tokens one lease may carry. */
  maxLease: number;
  /** Most tokens the pacing lets go at once (two leases). */
  burst: number;
}

/**
 * The cap for `tps`: at most `floor(tps)` tokens in any window of one second plus `guardMs`
 * (fractions above one are rounded down; below one, one token per `1/tps` seconds). The guard
 * keeps the count under the cap as the SMSC measures it, which sees each submit a little later
 * or earlier than we spent its token (network, scheduling).
 */
export function capShape(tps: number, guardMs: number): CapShape {
  if (!(tps > 0)) throw new RangeError(`tps must be > 0, got ${tps}`);
  const guard = Math.max(0, guardMs);
  const budget = tps >= 1 ? Math.floor(tps) : 1;
  const windowMs = (tps >= 1 ? 1000 : 1000 / tps) + guard;
  const maxLease = Math.max(1, Math.min(budget, Math.floor(tps * MAX_LEASE_SHARE)));
  return { budget, windowMs, intervalUs: 1e6 / tps, maxLease, burst: Math.min(budget, 2 * maxLease) };
}

/** What the previous lease saw: tokens granted and spent, and how long it was held (grant → exhausted or expired). */
export interface LeaseUse {
  granted: number;
  spent: number;
  heldMs: number;
}

/**
 * Tokens to ask for next: enough for LEASE_HORIZON_MS at the rate the previous lease was spent,
 * at least twice the previous lease when that one ran out (demand above what it carried), and
 * within 1..maxLease. Without history: a quarter of maxLease.
 */
export function nextLeaseSize(prev: LeaseUse | null, maxLease: number): number {
  const cap = Math.max(1, Math.floor(maxLease));
  if (!prev) return Math.max(1, Math.ceil(cap / 4));
  const rate = prev.spent / Math.max(1, prev.heldMs); // tokens per ms
  let size = Math.ceil(rate * LEASE_HORIZON_MS);
  if (prev.granted > 0 && prev.spent >= prev.granted) size = Math.max(size, 2 * prev.granted);
  return Math.min(cap, Math.max(1, size));
}

/**
 * Whether to ask for the next lease while the current one still has tokens: when at most a
 * quarter of it is left and, at the rate it was spent so far, it runs out before it expires; the
 * next one then arrives before this one runs out. A lease spent too slowly to run out is not
 * renewed ahead: an idle process holds nothing it does not use.
 */
export function shouldRenewEarly(granted: number, spent: number, heldMs: number, validityMs: number): boolean {
  const remaining = granted - spent;
  if (remaining <= 0 || remaining * 4 > granted) return false; // exhausted (the next take asks anyway) or plenty left
  return remaining * Math.max(heldMs, 0) < spent * (validityMs - heldMs); // remaining / rate < time left
}
