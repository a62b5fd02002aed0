/** API-key authentication; each API family answers a failure in its own form (D2, D6, D8, D9). */
import type { Request } from 'express';
import type { Queryable } from '../../shared/db/pool.js';
import { authenticateKey, type ApiKeyRecord } from '../../shared/domain/keys.js';

export function headerKey(req: Request, name = 'x-api-key'): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

export async function keyFromRequest(db: Queryable, presented: string | undefined): Promise<ApiKeyRecord | null> {
  return presented ? authenticateKey(db, presented) : null;
}
