/** Admin authentication: `Authorization: Bearer <ADMIN_TOKEN>` (or basic auth with the token as password, for browsers on bull-board). */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { presentedCredential } from '../../shared/auth-header.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

export function adminAuth(token: string | null, opts: { basicChallenge?: boolean } = {}): RequestHandler {
  const expected = token ? digest(token) : null;
  return (req, res, next) => {
    const presented = presentedCredential(req.headers.authorization, { basic: true });
    // Comparing digests keeps the comparison constant-time whatever the presented length.
    if (expected && presented && timingSafeEqual(digest(presented), expected)) {
      next();
      return;
    }
    if (opts.basicChallenge) {
      res.setHeader('WWW-Authenticate', 'Basic realm="switchboard admin"');
    }
    res.status(401).json({ error: 'UNAUTHORIZED', message: expected ? 'Invalid or missing admin token' : 'Admin API disabled: ADMIN_TOKEN is not set' });
  };
}

/**
 * For pages a browser signs in to with basic auth (bull-board): a browser sends the credentials it
 * has cached with any request to the origin, a cross-site form's too, so a request that changes
 * something (not GET, HEAD or OPTIONS) is refused (403) when the browser says it comes from another
 * site: `Sec-Fetch-Site` other than `same-origin` or `none`, or, from a browser that does not send
 * it, an `Origin` whose host is not the request's. Clients that are not browsers (curl with the bearer token) send neither and pass.
 */
export function sameOriginWrites(): RequestHandler {
  return (req, res, next) => {
    if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') {
      next();
      return;
    }
    // A browser that sends Sec-Fetch-Site is believed (behind a proxy the Host we see may not be
    // the one in Origin); an older one is judged by Origin against the Host it was sent to.
    const site = req.headers['sec-fetch-site'];
    const origin = req.headers.origin;
    let crossSite = site !== undefined && site !== 'same-origin' && site !== 'none';
    if (site === undefined && origin !== undefined) {
      try {
        crossSite = new URL(origin).host !== req.headers.host;
      } catch {
        crossSite = true; // `null` (a sandboxed frame, a file) or garbage
      }
    }
    if (crossSite) {
      res.status(403).json({ error: 'FORBIDDEN', message: 'A change to the queues must come from the queues page itself (cross-site request refused)' });
      return;
    }
    next();
  };
}
