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
