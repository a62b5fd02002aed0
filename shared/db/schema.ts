/**
 * The schema a process needs, for processes that do not migrate: production `web` and `worker`
 * processes wait for the release step (`switchboard migrate`) instead of migrating concurrently,
 * and the operator CLI refuses to act on a database that lacks migrations.
 */
import type { Queryable } from './pool.js';
import { migrationFiles } from './pool.js';

/** Migrations of this build that the database has not applied yet (all of them on an empty database). */
export async function pendingMigrations(db: Queryable): Promise<string[]> {
  const files = migrationFiles();
  const { rows: exists } = await db.query<{ table: string | null }>(`SELECT to_regclass('schema_migrations')::text AS table`);
  if (!exists[0]?.table) return files;
  const { rows } = await db.query<{ name: string }>('SELECT name FROM schema_migrations');
  const done = new Set(rows.map((r) => r.name));
  return files.filter((f) => !done.has(f));
}

export class SchemaNotReadyError extends Error {
  constructor(readonly pending: string[], waitedMs: number) {
    super(`the database lacks migrations ${describe(pending)} after waiting ${Math.round(waitedMs / 1000)} s; ` +
      'run the release step (`switchboard migrate`, Procfile `release:`, the compose service `release`) or set MIGRATE_ON_START=true on one process');
    this.name = 'SchemaNotReadyError';
  }
}

export function describe(pending: string[]): string {
  if (pending.length === 0) return '(none)';
  return pending.length === 1 ? pending[0]! : `${pending[0]} … ${pending[pending.length - 1]} (${pending.length})`;
}

/**
 * Resolves once every migration of this build is applied; polls every `pollMs` and tells
 * `onWait` (first at once, then every `reportEveryMs`) what it waits for. Throws
 * SchemaNotReadyError after `timeoutMs` (0: no wait at all).
 */
export async function waitForSchema(
  db: Queryable, opts: { timeoutMs: number; pollMs?: number; reportEveryMs?: number; onWait?: (pending: string[]) => void },
): Promise<void> {
  const started = Date.now();
  let reported = -Infinity;
  for (;;) {
    const pending = await pendingMigrations(db);
    if (pending.length === 0) return;
    const waited = Date.now() - started;
    if (waited >= opts.timeoutMs) throw new SchemaNotReadyError(pending, waited);
    if (Date.now() - reported >= (opts.reportEveryMs ?? 15_000)) {
      reported = Date.now();
      opts.onWait?.(pending);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(opts.pollMs ?? 1000, opts.timeoutMs - waited)));
  }
}
