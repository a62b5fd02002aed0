/** What the HTTP layer is given: built once by the process entry, shared by every router. */
import type { Config } from '../shared/config.js';
import type { Db } from '../shared/db/pool.js';
import type { Redis } from '../shared/redis.js';
import type { Queues } from '../shared/queues.js';
import type { Logger } from '../shared/logger.js';
import type { Engine } from '../shared/engine/engine.js';
import type { SecretBox } from '../shared/secrets/sealed.js';

export interface AppContext {
  config: Config;
  db: Db;
  redis: Redis;
  queues: Queues;
  logger: Logger;
  engine: Engine;
  /** Seals and opens carrier credentials (CREDENTIALS_KEY). */
  secrets: SecretBox;
}
