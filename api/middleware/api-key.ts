/** API-key authentication; each API family answers a failure in its own form (D2, D6, D8, D9). */
import type { Request } from 'express';
import type { Queryable } from '../../shared/db/pool.js';
import { authenticateKey, keyAllows, type ApiKeyRecord, type KeyUse } from '../../shared/domain/keys.js';

export function headerKey(req: Request, name = 'x-api-key'): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/**
 * The key presented, or null when it is missing, unknown, disabled, or its scope does not cover
 * `use` (a `rest-api` key on the sending side is refused like an unknown one: the sending API's
 * "explicit deny"). `any`: the caller checks the scope itself (the REST API answers 403).
 */
export async function keyFromRequest(db: Queryable, presented: string | undefined, use: KeyUse | 'any'): Promise<ApiKeyRecord | null> {
  const key = presented ? await authenticateKey(db, presented) : null;
  return key && (use === 'any' || keyAllows(key.scope, use)) ? key : null;
}
