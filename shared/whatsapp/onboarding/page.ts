/**
 * The rules of the hosted onboarding page (pure, table-tested): where Embedded Signup is loaded
 * from, which `postMessage` origins the page believes, the Content-Security-Policy that allows only
 * that, and what `FB.login` is given (the prefill from the signup).
 *
 * Production loads Meta's JS SDK; its Embedded Signup popup (a facebook.com page) posts the
 * `WA_EMBEDDED_SIGNUP` message, so only `https://facebook.com` and its subdomains are believed.
 * With WHATSAPP_SDK_URL (the simulator's `/_sim/sdk.js`) the stand-in runs inside our own page and
 * posts to it from there: the message's origin is then the page's own (sent by the page's window
 * itself), or the simulator's should a stand-in post from a frame of its own.
 */
import type { Signup } from './store.js';

export const META_SDK_URL = 'https://connect.facebook.net/en_US/sdk.js';

export interface PagePolicy {
  /** The script that defines `FB`. */
  sdkUrl: string;
  /** Believe messages from https://facebook.com and https://*.facebook.com. */
  facebookOrigins: boolean;
  /** Other origins whose messages are believed. */
  origins: string[];
  /** Believe messages the page's own window posts to itself (the simulator's stand-in). */
  ownWindow: boolean;
  /** The Content-Security-Policy header for a page whose inline script and style carry `nonce`. */
  csp(nonce: string): string;
}

/** `https://*.facebook.com` or `https://facebook.com` exactly (no port, no other scheme, no look-alike suffix). */
export const FACEBOOK_ORIGIN_RE = /^https:\/\/(?:[a-z0-9-]+\.)*facebook\.com$/;

export function isFacebookOrigin(origin: string): boolean {
  return FACEBOOK_ORIGIN_RE.test(origin);
}

function originOf(url: string | null): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : null;
  } catch {
    return null;
  }
}

export function pagePolicy(opts: { sdkUrl: string | null; logoUrl: string | null }): PagePolicy {
  const standIn = originOf(opts.sdkUrl);
  const sdkUrl = standIn ? opts.sdkUrl! : META_SDK_URL;
  const logo = originOf(opts.logoUrl);
  const meta = ['https://connect.facebook.net'];
  const facebook = ['https://*.facebook.com', 'https://facebook.com'];
  const sources = standIn ? [standIn] : meta;
  return {
    sdkUrl,
    facebookOrigins: standIn === null,
    origins: standIn ? [standIn] : [],
    ownWindow: standIn !== null,
    csp(nonce) {
      const uniq = (list: Array<string | null>): string => [...new Set(list.filter((s): s is string => s !== null))].join(' ');
      return [
        "default-src 'none'",
        `script-src 'nonce-${nonce}' ${uniq(sources)}`,
        `style-src 'nonce-${nonce}'`,
        `img-src ${uniq(["'self'", 'data:', logo, ...(standIn ? [] : [...facebook, 'https://*.fbcdn.net'])])}`,
        `connect-src ${uniq(["'self'", ...sources, ...(standIn ? [] : facebook)])}`,
        ...(standIn ? [] : [`frame-src ${uniq(facebook)}`]),
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
      ].join('; ');
    },
  };
}

/** Security headers of every onboarding page (the page itself and its error pages). */
export function pageHeaders(csp: string): Record<string, string> {
  return {
    'content-security-policy': csp,
    // The token is in the page's URL: no Referer may carry it to the SDK's host or the partner.
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'cross-origin-opener-policy': 'same-origin-allow-popups',
  };
}

/** The CSP of an error page: no script at all. */
export function errorPageCsp(nonce: string): string {
  return `default-src 'none'; style-src 'nonce-${nonce}'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}

/**
 * The options of `FB.login` (Embedded Signup v4) from the signup: the prefill of the business
 * screens, and `only_waba_sharing` (no phone-number screens) for `phone_number: "automatic"`.
 */
export function loginOptions(signup: Pick<Signup, 'waName' | 'waEmail' | 'waWebsite' | 'country' | 'phoneNumber'>, configId: string): Record<string, unknown> {
  const business: Record<string, unknown> = { name: signup.waName, email: signup.waEmail, address: { country: signup.country } };
  if (signup.waWebsite) business.website = signup.waWebsite;
  return {
    config_id: configId,
    response_type: 'code',
    override_default_response_type: true,
    extras: {
      setup: { business, phone: { displayName: signup.waName } },
      featureType: signup.phoneNumber === 'automatic' ? 'only_waba_sharing' : '',
      sessionInfoVersion: '3',
      version: 'v4',
    },
  };
}
