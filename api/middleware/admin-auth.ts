/** Admin authentication: `Authorization: Bearer <ADMIN_TOKEN>` (or basic auth with the token as password, for browsers on bull-board). */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';

const digest = (s: string) => createHash('sha256').update(s).digest();

export function adminAuth(token: string | null, opts: { basicChallenge?: boolean } = {}): RequestHandler {
  const expected = token ? digest(token) : null;
  return (req, res, next) => {
    const header = req.headers.authorization ?? '';
    // The scheme's name is case-insensitive (RFC 9110 11.1): `bearer` and `BASIC` too.
    const scheme = header.slice(0, header.indexOf(' ') + 1).toLowerCase();
    let presented = '';
    if (scheme === 'bearer ') {
      presented = header.slice(7).trim();
    } else if (scheme === 'basic ') {
      const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
      presented = decoded.slice(decoded.indexOf(':') + 1);
    }
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
