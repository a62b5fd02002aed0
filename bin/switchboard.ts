/**
 * The one entry of the compiled service (`node dist/bin/switchboard.js <command>`):
 *
 *   start                                        the Procfile's roles in child processes under a supervisor (npm start)
 *   all | web | worker [--pools=…] [--lanes=…]   a service process (runs until SIGTERM/SIGINT, then drains)
 *   migrate                                      the release step: applies migrations, prints JSON, exits
 *   accounts:create, prices:set, …               operator commands (scripts/cli-commands.ts), JSON on stdout
 *
 * `start` (what `npm start` runs, services/start.ts) migrates once, then runs `web` and every
 * worker line of the Procfile each in a process of its own, restarting one that dies. `all` (the
 * image's default command, `npm run dev`, the tests) runs the API, every worker pool and the
 * sandbox in one process. `--lanes` limits the dispatch pools to some lanes: a process of its own for the
 * priority lane keeps OTPs off a busy backlog's event loop. `--help` answers without touching the
 * database; an unknown flag is refused by name (exit 2).
 */
import { parseArgs } from 'node:util';
import { startRuntime, StartupError, ALL_POOLS, type PoolName, type Role } from '../services/runtime.js';
import { LANES, type Lane } from '../shared/queues.js';
import { ConfigError, loadConfig } from '../shared/config.js';
import { createPool, migrate } from '../shared/db/pool.js';
import { reachPostgres } from '../services/core.js';
import { redactUrl } from '../shared/net/redact-url.js';
import { CLI_COMMANDS, commandsOverview, runCli } from '../scripts/cli-commands.js';
import { runSupervisor, STARTED_MESSAGE, SUPERVISED_ENV } from '../services/start.js';
import { applyBulkWorkerNice, bulkWorkerNice } from '../services/cpu-priority.js';

const ROLES: readonly Role[] = ['all', 'web', 'worker'];

const USAGE = `usage: switchboard <command> [options]

service processes (JSON log lines on stdout; SIGTERM or SIGINT drains and exits 0):
  start                migrate, then the Procfile's roles (web and its workers), each in a child
                       process of its own, restarted when one dies (npm start)
  all                  the API, every worker pool and the sandbox in one process
  web                  the HTTP API only
  worker [--pools=${ALL_POOLS.join(',')}] [--lanes=${LANES.join(',')}]
                       worker pools (default: every pool and lane)
  migrate              apply the migrations this build brings, print {"applied": […]} and exit (the release step)

operator commands (JSON on stdout; switchboard <command> --help):
${commandsOverview()}

Configuration comes from the environment (README, "Configuration"); --help never touches the database.
`;

type Command = Role | 'migrate' | 'start';

const ROLE_USAGE: Record<Command, string> = {
  start: 'usage: switchboard start\n\n  applies migrations (unless MIGRATE_ON_START=false), then runs the Procfile\'s roles (web and its workers),\n' +
    '  each in a child process of its own with these node flags; a role that dies is restarted, one that cannot\n' +
    '  start three times in a row stops everything (exit 1); SIGTERM or SIGINT drains every role\n',
  all: 'usage: switchboard all [--pools=…] [--lanes=…]\n\n  the API, every worker pool and the sandbox in one process; migrates at start unless MIGRATE_ON_START=false\n',
  web: 'usage: switchboard web\n\n  the HTTP API only (PORT); in production it waits for the schema the release step applies\n',
  worker: `usage: switchboard worker [--pools=${ALL_POOLS.join(',')}] [--lanes=${LANES.join(',')}]\n\n` +
    '  worker pools (default: every pool and lane); METRICS_PORT opens /metrics and /health/* for it;\n' +
    '  in production it waits for the schema the release step applies\n',
  migrate: 'usage: switchboard migrate\n\n  applies the migrations this build brings (creating the database when it is missing), prints\n' +
    '  {"applied": [...]} on stdout and exits; run it once per release before the new processes start\n',
};

function usageError(message: string): never {
  process.stderr.write(`switchboard: ${message}\n`);
  process.exit(2);
}

function list<T extends string>(raw: string | undefined, known: readonly T[], what: string): T[] | null {
  if (raw === undefined) return null;
  const items = raw.split(',').filter(Boolean) as T[];
  const unknown = items.filter((i) => !known.includes(i));
  if (unknown.length > 0 || items.length === 0) {
    usageError(`unknown ${what}: ${unknown.join(', ') || '(none given)'} (known: ${known.join(', ')})`);
  }
  return items;
}

async function runMigrate(args: string[]): Promise<number> {
  parse(args, {}, 'migrate');
  const config = loadConfig();
  process.stderr.write(`switchboard migrate: database ${redactUrl(config.databaseUrl)}\n`);
  // Unreachable Postgres is said plainly with how to start it, as every role says it (it was a stack).
  await reachPostgres(config);
  const db = createPool(config.databaseUrl, 1);
  try {
    const applied = await migrate(db);
    process.stdout.write(`${JSON.stringify({ applied })}\n`);
    return 0;
  } finally {
    await db.end();
  }
}

function parse(args: string[], options: Record<string, { type: 'string' }>, command: Command): Record<string, string | undefined> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    usageError(`${command}: ${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (see switchboard ${command} --help)`);
  }
  if (values.help === true) {
    process.stdout.write(ROLE_USAGE[command]);
    process.exit(0);
  }
  return values as Record<string, string | undefined>;
}

async function runService(role: Role, args: string[]): Promise<void> {
  const values = parse(args, role === 'web' ? {} : { pools: { type: 'string' }, lanes: { type: 'string' } }, role);
  const pools = list<PoolName>(values.pools, ALL_POOLS, 'pools') ?? ALL_POOLS;
  const lanes: readonly Lane[] = list<Lane>(values.lanes, LANES, 'lanes') ?? LANES;
  // Under `switchboard start`: named in every log line, says when it started, and drains when the
  // supervisor is gone (its IPC channel closed, even if it was killed).
  const supervised = process.env[SUPERVISED_ENV] && process.send ? process.env[SUPERVISED_ENV] : undefined;
  const runtime = await startRuntime({ role, pools, lanes, ...(supervised !== undefined && { processName: supervised }) });
  // A process of its own (not a test's in-process service): a bulk-only worker yields the CPU to
  // the API and the priority lane when the machine is full (services/cpu-priority.ts).
  // A process that dispatches a channel family runs that family's carrier connections.
  applyBulkWorkerNice(bulkWorkerNice({ role, dispatching: runtime.connections !== null, lanes, nice: runtime.config.bulkWorkerNice }), runtime.logger);
  let signalled = false;
  const shutdown = (signal: string) => {
    if (signalled) {
      return;
    }
    signalled = true;
    runtime.logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      runtime.logger.error('graceful shutdown took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    runtime.stop().then(() => process.exit(0), (err: unknown) => {
      runtime.logger.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  if (supervised) {
    process.on('disconnect', () => shutdown('supervisor gone'));
    process.send!(STARTED_MESSAGE);
  }
}

const [command = 'all', ...rest] = process.argv.slice(2);
try {
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
  } else if ((ROLES as readonly string[]).includes(command)) {
    await runService(command as Role, rest);
  } else if (command === 'start') {
    parse(rest, {}, 'start');
    process.exit(await runSupervisor());
  } else if (command === 'migrate') {
    process.exitCode = await runMigrate(rest);
  } else if (CLI_COMMANDS.some((c) => c.name === command)) {
    process.exitCode = await runCli([command, ...rest]);
  } else {
    usageError(`unknown command "${command}" (switchboard --help lists them)`);
  }
} catch (err) {
  if (err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  // Not one of the failures foreseen with words of their own: the stack helps whoever reports it.
  process.stderr.write(`switchboard ${command}: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
