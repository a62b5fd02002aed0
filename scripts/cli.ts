/** Operator CLI entry: `npm run cli -- <command> …` (commands and flags: scripts/cli-commands.ts). */
import { loadConfig, ConfigError } from '../shared/config.js';
import { createPool, ensureDatabase, migrate } from '../shared/db/pool.js';
import { AppError } from '../shared/errors.js';
import { runCommand } from './cli-commands.js';

async function main(): Promise<number> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    console.error((err as ConfigError).message);
    return 2;
  }
  try {
    await ensureDatabase(config.databaseUrl);
  } catch (err) {
    console.error(JSON.stringify({ error: 'DATABASE_UNREACHABLE', message: `Cannot reach PostgreSQL: ${(err as Error).message}` }));
    return 1;
  }
  const db = createPool(config.databaseUrl, 2);
  try {
    await migrate(db);
    const result = await runCommand(db, process.argv.slice(2));
    console.log(JSON.stringify(result, null, 2));
    return 0;
  } catch (err) {
    if (err instanceof AppError) {
      console.error(JSON.stringify({ error: err.code, message: err.message }));
      return 2;
    }
    console.error(JSON.stringify({ error: 'INTERNAL_ERROR', message: (err as Error).message }));
    return 1;
  } finally {
    await db.end();
  }
}

process.exitCode = await main();
