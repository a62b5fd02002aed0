/**
 * Who may post a Viber connection's callbacks. Viber BM callbacks carry no published signature
 * (channels.md 3.2), so a connection's callback URL holds an unguessable token, optionally backed
 * by a shared-secret header and a list of source addresses. Checked before the body is parsed (the
 * generic route has read the raw body, at most 1 MiB, and nothing of it is looked at before).
 *
 * - source allowlist (when given): exact addresses or CIDR ranges, IPv4 and IPv6; an IPv4-mapped
 *   IPv6 peer (`::ffff:10.1.2.3`) matches IPv4 entries; an entry that does not parse matches
 *   nothing. Failing it answers 403 (the token cannot help).
 * - token: the last segment of the path below `/callbacks/viber/<connection>` or the
 *   `x-callback-token` header; missing or wrong answers 401.
 * - shared secret (when configured): the `x-callback-secret` header; missing or wrong answers 401.
 *
 * Secrets are compared in constant time (as SHA-256 digests, so their lengths do not show) and
 * never appear in a reason.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type ipaddr from 'ipaddr.js';
import { parseStrictIp } from '../../net/ssrf.js';

export const CALLBACK_TOKEN_HEADER = 'x-callback-token';
export const CALLBACK_SECRET_HEADER = 'x-callback-secret';

export interface CallbackAuthRequest {
  /** The path below `/callbacks/<kind>/<connection>`, e.g. `/<token>`; '' when none. */
  subpath: string;
  /** Header names in lower case. */
  headers: Record<string, string | undefined>;
  remoteAddress: string;
}

export interface CallbackAuthConfig {
  callbackToken: string;
  sharedSecret?: string;
  /** Addresses and CIDR ranges; absent or empty = any source. */
  allowedSources?: readonly string[];
}

export type CallbackAuthResult = { ok: true } | { ok: false; status: 401 | 403; reason: string };

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** Constant-time equality of two secrets (an empty expected value never matches). */
export function secretEquals(given: string, expected: string): boolean {
  if (expected.length === 0) return false;
  return timingSafeEqual(digest(given), digest(expected));
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = [Address, number];

/** Strict parse of an address, IPv4-mapped IPv6 turned into IPv4 (so it matches IPv4 entries). */
function parseAddress(raw: string): Address | null {
  const addr = parseStrictIp(raw);
  if (addr && addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) return (addr as ipaddr.IPv6).toIPv4Address();
  return addr;
}

/** One allowlist entry as a range (an exact address is a full-length prefix), or null when it does not parse. */
export function parseSourceEntry(entry: string): Range | null {
  const slash = entry.indexOf('/');
  const addr = parseAddress(slash === -1 ? entry : entry.slice(0, slash));
  if (!addr) return null;
  const bits = addr.kind() === 'ipv4' ? 32 : 128;
  let prefix = bits;
  if (slash !== -1) {
    const p = entry.slice(slash + 1).trim();
    if (!/^\d{1,3}$/.test(p)) return null;
    prefix = Number(p);
    // `::ffff:10.0.0.0/104` was turned into 10.0.0.0 above: its prefix counts the 96 mapped bits too.
    const mapped = addr.kind() === 'ipv4' && entry.slice(0, slash).includes(':');
    if (mapped) prefix -= 96;
    if (prefix < 0 || prefix > bits) return null;
  }
  return [addr, prefix];
}

/** Entries of an allowlist that do not parse (for the connection's config check). */
export function invalidSourceEntries(list: readonly string[]): string[] {
  return list.filter((e) => parseSourceEntry(e) === null);
}

const compiled = new WeakMap<readonly string[], Range[]>();

function ranges(list: readonly string[]): Range[] {
  let r = compiled.get(list);
  if (!r) {
    r = list.map(parseSourceEntry).filter((x): x is Range => x !== null);
    compiled.set(list, r);
  }
  return r;
}

/** True when `address` is one of the list's addresses or inside one of its ranges. */
export function sourceAllowed(address: string, list: readonly string[]): boolean {
  const addr = parseAddress(address);
  if (!addr) return false;
  for (const [base, prefix] of ranges(list)) {
    if (base.kind() === addr.kind() && addr.match(base, prefix)) return true;
  }
  return false;
}

function lastSegment(subpath: string): string {
  const parts = subpath.split('/').filter((p) => p.length > 0);
  return parts.length > 0 ? decodeURIComponent(parts[parts.length - 1] ?? '') : '';
}

export function authorizeCallback(req: CallbackAuthRequest, cfg: CallbackAuthConfig): CallbackAuthResult {
  if (cfg.allowedSources && cfg.allowedSources.length > 0 && !sourceAllowed(req.remoteAddress, cfg.allowedSources)) {
    return { ok: false, status: 403, reason: `source address ${req.remoteAddress} is not allowed` };
  }
  let segment: string;
  try {
    segment = lastSegment(req.subpath);
  } catch {
    segment = '';
  }
  const header = req.headers[CALLBACK_TOKEN_HEADER] ?? '';
  if (segment === '' && header === '') return { ok: false, status: 401, reason: 'callback token missing' };
  // Both are compared (no early exit) so the timing says nothing about which one was tried.
  const bySegment = secretEquals(segment, cfg.callbackToken);
  const byHeader = secretEquals(header, cfg.callbackToken);
  if (!bySegment && !byHeader) return { ok: false, status: 401, reason: 'callback token does not match' };
  if (cfg.sharedSecret !== undefined && cfg.sharedSecret !== '') {
    const secret = req.headers[CALLBACK_SECRET_HEADER];
    if (secret === undefined || secret === '') return { ok: false, status: 401, reason: `${CALLBACK_SECRET_HEADER} header missing` };
    if (!secretEquals(secret, cfg.sharedSecret)) return { ok: false, status: 401, reason: `${CALLBACK_SECRET_HEADER} header does not match` };
  }
  return { ok: true };
}
