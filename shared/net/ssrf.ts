/**
 * SSRF guard for customer-supplied callback URLs.
 *
 * Two layers:
 *  - checkCallbackUrl(): syntax + policy check, applied when a URL is accepted
 *    and again right before sending. Refuses private/special IP literals and
 *    localhost names (unless private callbacks are allowed).
 *  - isPublicAddress(): used at connect time on every DNS answer, so a public
 *    looking hostname that resolves to a private address is refused too.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

export type UrlPolicyResult = { ok: true; url: URL } | { ok: false; reason: string };

export const MAX_CALLBACK_URL_LENGTH = 2048;

/** IPv4-compatible IPv6 (::a.b.c.d, deprecated): ipaddr.js calls these 'unicast'. */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');

function classify(addr: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return classify(v6.toIPv4Address());
    if (v6.match(IPV4_COMPATIBLE)) return false;
  }
  return addr.range() === 'unicast';
}

/** An IP literal (brackets and zone id allowed), or null; ipaddr.js' lenient forms are refused. */
export function parseStrictIp(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  let s = ip.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  // Zone ids (fe80::1%eth0) only occur on link-local addresses; drop them for parsing.
  const zone = s.indexOf('%');
  if (zone !== -1) s = s.slice(0, zone);
  // Strict syntax: refuse ipaddr.js' lenient forms (octal, hex, short IPv4).
  if (isIP(s) === 0) return null;
  try {
    return ipaddr.parse(s);
  } catch {
    return null;
  }
}

/** True when this resolved address may be connected to (global unicast only). */
export function isPublicAddress(ip: string): boolean {
  const addr = parseStrictIp(ip);
  return addr !== null && classify(addr);
}

function isLocalhostName(host: string): boolean {
  const h = host.toLowerCase().replace(/\.+$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/**
 * Syntax check of an http(s) URL the service will connect to (callbacks, Viber button URLs):
 * parsed with WHATWG URL, as the HTTP client will parse it (so `http://%zz/` and port 99999 are
 * refused here, not at delivery), http or https, a host, a port in 1-65535, at most 2048
 * characters before and after normalisation.
 */
export function checkHttpUrl(raw: string): UrlPolicyResult {
  if (typeof raw !== 'string' || raw.length === 0) return { ok: false, reason: 'URL is required' };
  if (raw.length > MAX_CALLBACK_URL_LENGTH) {
    return { ok: false, reason: `URL is longer than ${MAX_CALLBACK_URL_LENGTH} characters` };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'URL is not valid' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: 'URL scheme must be http or https' };
  }
  if (!url.hostname) return { ok: false, reason: 'URL has no host' };
  // WHATWG URL refuses ports over 65535 itself; port 0 parses but cannot be connected to.
  if (url.port !== '' && !(Number(url.port) >= 1 && Number(url.port) <= 65535)) {
    return { ok: false, reason: 'URL port must be 1-65535' };
  }
  if (url.href.length > MAX_CALLBACK_URL_LENGTH) {
    return { ok: false, reason: `URL is longer than ${MAX_CALLBACK_URL_LENGTH} characters` };
  }
  return { ok: true, url };
}

/**
 * Syntax + policy check for a callback URL: `checkHttpUrl`, then, with allowPrivate=false,
 * IP-literal hosts must be public and localhost names are refused. Credentials in the URL are
 * allowed.
 */
export function checkCallbackUrl(raw: string, allowPrivate: boolean): UrlPolicyResult {
  const syntax = checkHttpUrl(raw);
  if (!syntax.ok) return syntax;
  const url = syntax.url;
  const host = url.hostname;
  if (allowPrivate) return { ok: true, url };

  if (isLocalhostName(host)) return { ok: false, reason: 'URL host is not allowed (localhost)' };

  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(bare) !== 0) {
    if (!isPublicAddress(bare)) {
      return { ok: false, reason: 'URL host is a private or reserved IP address' };
    }
  }
  return { ok: true, url };
}
