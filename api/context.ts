/** What the HTTP layer is given: built once by the process entry, shared by every router. */
import type { Config } from '../shared/config.js';
import type { Db } from '../shared/db/pool.js';
import type { Redis } from '../shared/redis.js';
import type { Queues } from '../shared/queues.js';
import type { Logger } from '../shared/logger.js';
import type { Engine } from '../shared/engine/engine.js';
import type { SecretBox } from '../shared/secrets/sealed.js';
import type { LargeCallTurns } from '../shared/sending/large-call-turns.js';

export interface AppContext {
  config: Config;
  db: Db;
  redis: Redis;
  queues: Queues;
  logger: Logger;
  engine: Engine;
  /** Seals and opens carrier credentials (CREDENTIALS_KEY). */
  secrets: SecretBox;
  /**
   * The process's turns for large send calls: the send API takes them, and its small calls and
   * verification starts narrow them (shared/sending/large-call-turns.ts).
   */
  largeCalls: LargeCallTurns;
}
