/** Engine hooks of the verification API (filled in by the verification slice). */
import type { Db } from '../db/pool.js';
import type { Config } from '../config.js';
import type { EngineHooks } from '../engine/engine.js';

export function verificationHooks(_db: Db, _config: Config): EngineHooks {
  return {};
}
