/**
 * What a scenario runs against: a fresh database, a fresh Redis prefix (or a private Redis), the
 * compiled service in child processes (NODE_ENV=production) and, for SMPP, the simulator child.
 * Everything is created here and torn down by the returned `stop()` functions / the cleanup stack.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { spawnChild, stopChild, type Child } from './procs.js';
import { Client } from './load.js';
import type { Options } from './options.js';
import { copiesByRole, expandCopies, type CopiesSpec } from './copies.js';

export interface Ctx {
  root: string;
  runDir: string;
  opts: Options;
  /** Redis the service uses (REDIS_URL, or the private one). */
  redisUrl: string;
  /** Admin connection to that Redis (INFO, prefix cleanup). */
  redis: Redis;
  /** Run id used in database names and prefixes. */
  id: string;
  log(message: string): void;
  /** Register a cleanup; run in reverse order at the end (also on Ctrl-C / errors). */
  onCleanup(fn: () => Promise<void>): () => void;
}

// ---------------------------------------------------------------------------------------------
// Postgres and Redis
// ---------------------------------------------------------------------------------------------

export interface BenchDb {
  name: string;
  url: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

export async function createDatabase(ctx: Ctx, label: string): Promise<BenchDb> {
  const name = `sb_bench_${ctx.id}_${label.replace(/[^a-z0-9]/g, '')}`;
  const admin = new pg.Client({ connectionString: ctx.opts.pgUrl, connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ctx.opts.pgUrl);
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on('error', () => undefined);
  let dropped = false;
  const drop = async () => {
    if (dropped) {
      return;
    }
    dropped = true;
    await pool.end().catch(() => undefined);
    if (ctx.opts.keep) {
      ctx.log(`kept database ${name}`);
      return;
    }
    const c = new pg.Client({ connectionString: ctx.opts.pgUrl, connectionTimeoutMillis: 5000 });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  };
  const unregister = ctx.onCleanup(drop);
  return {
    name,
    url: url.toString(),
    pool,
    drop: async () => {
      unregister();
      await drop();
    },
  };
}

export async function deleteRedisPrefix(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 2000);
    cursor = next;
    if (keys.length) {
      deleted += await redis.unlink(...keys);
    }
  } while (cursor !== '0');
  return deleted;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** A private redis-server on a free loopback port (no persistence), for clean Redis CPU figures. */
export async function startOwnRedis(runDir: string): Promise<{ url: string; child: Child }> {
  const port = await freePort();
  const { child } = await spawnChild({
    name: 'redis-server',
    command: 'redis-server',
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    cwd: runDir,
    logFile: path.join(runDir, 'redis.log'),
    ready: (line) => /Ready to accept connections/.test(line),
    readyTimeoutMs: 10_000,
  });
  return { url: `redis://127.0.0.1:${port}`, child };
}

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

export interface ServiceSpec {
  label: string;
  /**
   * `split`: web + one worker with every pool; `procfile`: web + the Procfile's workers;
   * `start`: `switchboard start` (what npm start runs), which starts the Procfile's roles itself.
   */
  role: 'all' | 'web' | 'split' | 'procfile' | 'start';
  sandbox: boolean;
  smppUrl?: string | null;
  env?: Record<string, string>;
  /** Copies of each role (default `ctx.opts.copies`; roles it names that this layout does not run are ignored:
   * the accept scenario runs `web` alone); `role: 'all'` always runs one process. */
  copies?: CopiesSpec;
}

/** One process slot of the service: a role's copy, and the child that runs it now. */
export interface ServiceProcess {
  /** `worker_sms`, `worker_sms#2`. */
  id: string;
  role: string;
  args: string[];
  logFile: string;
  child: Child;
  /** Times the harness SIGKILLed it and started it again (epoch ms). */
  kills: Array<{ at: number; restartedAt: number | null; exitedHow: string }>;
  /** Set while the harness kills or restarts it on purpose. */
  intended: boolean;
}

export interface Service {
  /** The first web process (admin calls, /health, callbacks of the simulators). */
  url: string;
  /** Every web process (one per copy of `web`): the load generator spreads its requests over them. */
  urls: string[];
  db: BenchDb;
  prefix: string;
  adminToken: string;
  /** pids per CPU group: `service`, or one group per process slot (`service.web`, `service.worker_sms#2`, …). */
  groups: Record<string, number[]>;
  /** pids whose RSS is sampled (one per copy: `service.worker_sms`, `service.worker_sms#2`). */
  rssPids: Record<string, number>;
  /** The child of every process slot now. */
  readonly children: Child[];
  processes: ServiceProcess[];
  /** Copies per role started. */
  copies: Record<string, number>;
  env: Record<string, string>;
  admin: Client;
  /** SIGKILLs a process (no shutdown handlers run) and starts it again after `pauseMs` (null: not again). */
  killAndRestart(id: string, pauseMs: number | null): Promise<void>;
  /** Processes whose child exited without the harness asking it to. */
  unexpectedExits(): string[];
  /** Stops the processes (profiles are written then), drops the database, deletes the prefix. */
  stop(): Promise<{ profiles: string[]; errorLines: string[] }>;
}

const ADMIN_TOKEN_BYTES = 24;

/**
 * The Procfile's processes with their arguments to the compiled entry
 * (`worker_sms: node $(cat scripts/node-flags) dist/bin/switchboard.js worker --pools=sms …` →
 * `['worker', '--pools=sms', …]`); the harness runs them with the same node flags.
 */
export function procfileCommands(procfile: string): Array<readonly [string, string[]]> {
  const out: Array<readonly [string, string[]]> = [];
  for (const line of procfile.split('\n')) {
    const m = /^(\w+):\s*node\s+(?:\$\(cat scripts\/node-flags\)\s+)?dist\/bin\/switchboard\.js\s+(.*)$/.exec(line.trim());
    if (m) out.push([m[1]!, m[2]!.trim().split(/\s+/)]);
  }
  return out;
}

function procfileOf(root: string): Array<readonly [string, string[]]> {
  return procfileCommands(readFileSync(path.join(root, 'Procfile'), 'utf8'));
}

/** The Procfile's worker processes (`worker …` lines). */
function procfileWorkers(root: string): Array<readonly [string, string[]]> {
  return procfileOf(root).filter(([, args]) => args[0] === 'worker').map(([name, args]) => [name, args.slice(1)] as const);
}

/** The roles a service layout runs, in start order (web first), with their arguments after the entry. */
export function serviceRoles(root: string, layout: ServiceSpec['role']): Array<readonly [string, string[]]> {
  switch (layout) {
    case 'all':
      return [['service', ['all']]];
    case 'web':
      return [['web', ['web']]];
    case 'split':
      return [['web', ['web']], ['worker', ['worker']]];
    case 'procfile':
      return [['web', ['web']], ...procfileWorkers(root).map(([name, extra]): readonly [string, string[]] => [name, ['worker', ...extra]])];
    case 'start':
      return [['supervisor', ['start']]];
  }
}

/** The Procfile's release step (`release: … migrate`): production processes wait for the schema it applies. */
function releaseArgs(root: string): string[] {
  const release = procfileOf(root).find(([name]) => name === 'release');
  if (!release) throw new Error('Procfile: no release line (the benchmark runs it before the service, as a deployment does)');
  return release[1];
}

/** The port in a web process's "HTTP listening" log line, or null for any other line. */
function listeningPort(line: string): number | null {
  if (!line.startsWith('{') || !line.includes('HTTP listening')) {
    return null;
  }
  try {
    const port = (JSON.parse(line) as { port?: unknown }).port;
    return typeof port === 'number' ? port : null;
  } catch {
    return null;
  }
}

export async function startService(ctx: Ctx, spec: ServiceSpec): Promise<Service> {
  const db = await createDatabase(ctx, spec.label);
  const prefix = `sbbench_${ctx.id}_${spec.label.replace(/[^a-z0-9]/g, '')}`;
  const adminToken = randomBytes(ADMIN_TOKEN_BYTES).toString('hex');
  const unregisterPrefix = ctx.onCleanup(async () => {
    await deleteRedisPrefix(ctx.redis, prefix).catch(() => undefined);
  });
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    ...(process.env.TZ !== undefined && { TZ: process.env.TZ }),
    NODE_ENV: 'production',
    // Every process picks a free port (each web copy its own; the harness reads it from the log).
    PORT: '0',
    DATABASE_URL: db.url,
    REDIS_URL: ctx.redisUrl,
    REDIS_PREFIX: prefix,
    ADMIN_TOKEN: adminToken,
    CREDENTIALS_KEY: randomBytes(32).toString('hex'),
    ALLOW_PRIVATE_CALLBACKS: '1',
    SANDBOX: spec.sandbox ? '1' : '0',
    SMPP_URL: spec.smppUrl ?? '',
    LOG_LEVEL: 'info',
    ...ctx.opts.env,
    ...spec.env,
  };
  const profileDir = path.join(ctx.runDir, 'profiles', spec.label);
  // The flags `npm start` / the Procfile run the service with (scripts/start.sh).
  const nodeArgs = readFileSync(path.join(ctx.root, 'scripts/node-flags'), 'utf8').trim().split(/\s+/);
  if (ctx.opts.cpuProf) {
    mkdirSync(profileDir, { recursive: true });
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`);
  }
  const entry = path.join(ctx.root, 'dist/bin/switchboard.js');
  /** Every child started (restarts too): all are stopped at the end. */
  const started: Child[] = [];
  const processes: ServiceProcess[] = [];
  const groups: Record<string, number[]> = {};
  const rssPids: Record<string, number> = {};
  const urls: string[] = [];
  const copiesSpec = spec.copies ?? ctx.opts.copies;
  const roles = serviceRoles(ctx.root, spec.role);
  const copies: Record<string, number> = spec.role === 'all' ? { service: 1 } : copiesByRole(roles.map(([r]) => r), copiesSpec);
  const stopChildren = async () => {
    await Promise.all(started.map((c) => stopChild(c)));
  };
  const unregisterChildren = ctx.onCleanup(stopChildren);
  /** Starts (or starts again) one process slot; web processes are ready once they listen, workers once started. */
  const spawnRole = async (id: string, args: string[], logFile: string): Promise<{ child: Child; port: number | null }> => {
    const listens = args[args.indexOf(entry) + 1] !== 'worker';
    const out = await spawnChild<number | true>({
      name: `switchboard ${id} (${spec.label})`, args, env, cwd: ctx.root, logFile,
      ready: listens ? listeningPort : (line) => line.includes('switchboard started'),
      readyTimeoutMs: 60_000,
    });
    started.push(out.child);
    // One group per copy (`service.worker_sms#2`): how the work spreads over the copies shows; a
    // restarted copy's new pid joins its slot's group.
    const group = spec.role === 'all' ? 'service' : `service.${id}`;
    (groups[group] ??= []).push(out.child.pid);
    return { child: out.child, port: listens ? (out.ready as number) : null };
  };
  try {
    // The release step first, as a deployment runs it: production web and worker processes wait for its schema.
    const release = await spawnChild({
      name: `switchboard release (${spec.label})`, args: [...nodeArgs.filter((a) => !a.startsWith('--cpu-prof')), entry, ...releaseArgs(ctx.root)], env, cwd: ctx.root,
      logFile: path.join(ctx.runDir, `${spec.label}.release.log`), ready: (line) => line.startsWith('{"applied"'), readyTimeoutMs: 120_000,
    });
    const released = await release.child.exited;
    if (released !== '0') throw new Error(`the release step exited ${released}:\n${release.child.tail()}`);
    if (spec.role === 'start') {
      // What `npm start` runs: one supervisor process whose children (one per Procfile role) are
      // found in its log lines, each naming its role and pid. Copies and kills do not apply.
      let webPort: number | null = null;
      let children: Record<string, number> | null = null;
      const args = [...nodeArgs, entry, 'start'];
      const logFile = path.join(ctx.runDir, `${spec.label}.start.log`);
      const sup = await spawnChild<{ port: number; roles: Record<string, number> }>({
        name: `switchboard start (${spec.label})`, args, env, cwd: ctx.root, logFile, readyTimeoutMs: 120_000,
        ready: (line) => {
          const parsed = line.startsWith('{') ? parseLine(line) : null;
          if (parsed?.process === 'web' && typeof parsed.port === 'number' && parsed.msg === 'HTTP listening') webPort = parsed.port;
          if (parsed?.msg === 'every process started') children = parsed.processes as Record<string, number>;
          return webPort !== null && children !== null ? { port: webPort, roles: children } : null;
        },
      });
      started.push(sup.child);
      processes.push({ id: 'supervisor', role: 'supervisor', args, logFile, child: sup.child, kills: [], intended: false });
      groups['service.supervisor'] = [sup.child.pid];
      for (const [name, pid] of Object.entries(sup.ready.roles)) {
        groups[`service.${name}`] = [pid];
        rssPids[`service.${name}`] = pid;
      }
      urls.push(`http://127.0.0.1:${sup.ready.port}`);
    } else {
      for (const [role, roleArgs] of roles) {
        for (const { id } of expandCopies([role], spec.role === 'all' ? { all: 1, perRole: {} } : copiesSpec)) {
          const args = [...nodeArgs, entry, ...roleArgs];
          const logFile = path.join(ctx.runDir, `${spec.label}.${id.replace('#', '-')}.log`);
          const { child, port } = await spawnRole(id, args, logFile);
          processes.push({ id, role, args, logFile, child, kills: [], intended: false });
          rssPids[spec.role === 'all' ? 'service' : `service.${id}`] = child.pid;
          if (port !== null) {
            urls.push(`http://127.0.0.1:${port}`);
          }
        }
      }
    }
  } catch (err) {
    await stopChildren();
    unregisterChildren();
    await db.drop().catch(() => undefined);
    throw err;
  }
  const url = urls[0]!;
  const admin = new Client(url, 2, { authorization: `Bearer ${adminToken}` });
  // /health answers 200 once Postgres and Redis answer.
  const deadline = Date.now() + 15_000;
  for (;;) {
    const res = await admin.request('GET', '/health').catch(() => null);
    if (res?.status === 200) {
      break;
    }
    if (Date.now() > deadline) {
      throw new Error(`service ${spec.label}: /health did not answer 200 within 15 s`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const sql of ctx.opts.setupSql) {
    ctx.log(`setup SQL on ${db.name}: ${sql}`);
    await db.pool.query(sql);
  }
  const byId = (id: string): ServiceProcess => {
    const p = processes.find((x) => x.id === id);
    if (!p) throw new Error(`service ${spec.label} runs no process ${id}`);
    return p;
  };
  return {
    url, urls, db, prefix, adminToken, groups, rssPids, processes, copies, env, admin,
    get children() {
      return processes.map((p) => p.child);
    },
    killAndRestart: async (id, pauseMs) => {
      const p = byId(id);
      if (pauseMs !== null && p.args[p.args.indexOf(entry) + 1] !== 'worker') {
        throw new Error(`${id}: only worker processes are restarted in place (a web process would listen on another port)`);
      }
      p.intended = true;
      const at = Date.now();
      p.child.proc.kill('SIGKILL');
      const how = await p.child.exited;
      const record = { at, restartedAt: null as number | null, exitedHow: how };
      p.kills.push(record);
      ctx.log(`SIGKILLed ${id} (${spec.label}, pid ${p.child.pid})${pauseMs === null ? '' : `; starting it again in ${pauseMs / 1000} s`}`);
      if (pauseMs === null) {
        return;
      }
      await new Promise((r) => setTimeout(r, pauseMs));
      // A restarted web process gets another port: only workers are restarted in place.
      const { child } = await spawnRole(id, p.args, p.logFile);
      p.child = child;
      p.intended = false;
      record.restartedAt = Date.now();
      ctx.log(`${id} (${spec.label}) is up again (pid ${child.pid}) after ${Math.round((record.restartedAt - at) / 100) / 10} s`);
    },
    unexpectedExits: () => processes.filter((p) => !p.intended && !p.child.alive()).map((p) => p.id),
    stop: async () => {
      await admin.close().catch(() => undefined);
      await stopChildren();
      unregisterChildren();
      const errorLines = started.flatMap((c) => c.errorLines);
      await db.drop();
      await deleteRedisPrefix(ctx.redis, prefix).catch(() => undefined);
      unregisterPrefix();
      let profiles: string[] = [];
      if (ctx.opts.cpuProf) {
        try {
          profiles = readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(profileDir, f));
        } catch {
          profiles = [];
        }
      }
      return { profiles, errorLines };
    },
  };
}

function parseLine(line: string): Record<string, unknown> | null {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export interface BenchAccount {
  accountId: number;
  keyId: number;
  apiKey: string;
}

/** The bench account's initial CZK credit (the charge check compares its balance with it). */
export const BENCH_CREDIT_CZK = 1_000_000_000;

/** An account with credit for any run (through the admin API, as an operator would). */
export async function createAccount(service: Service): Promise<BenchAccount> {
  const res = await service.admin.json<{ account_id: number; api_key: string }>('POST', '/admin/api/accounts', {
    name: 'bench', currency: 'CZK', credit_czk: BENCH_CREDIT_CZK, credit_eur: 1_000_000_000, default_sender: 'Bench',
  });
  if (res.status !== 201) {
    throw new Error(`creating the bench account failed: ${res.status} ${JSON.stringify(res.body)}`);
  }
  const { rows } = await service.db.pool.query<{ id: string }>('SELECT id FROM api_keys WHERE account_id = $1 AND is_primary', [res.body.account_id]);
  return { accountId: res.body.account_id, keyId: Number(rows[0]!.id), apiKey: res.body.api_key };
}

// ---------------------------------------------------------------------------------------------
// The SMSC simulator
// ---------------------------------------------------------------------------------------------

export interface SimStats {
  counters: { submits: number; submitsAccepted: number; submitsRefused: number; receiptsSent: number; receiptsAcked: number; binds: number; maxOutstanding: number };
  boundSessions: number;
  outstanding: number;
  firstSubmitAt: number;
  lastSubmitAt: number;
  firstReceiptAt: number;
  lastReceiptAt: number;
  destinations: number;
  submitsPerSecond: number[];
}

export interface Simulator {
  port: number;
  child: Child;
  stats(): Promise<SimStats>;
  lookup(destinations: string[]): Promise<Record<string, number | null>>;
  repeats(): Promise<SimRepeats>;
  /** Zeroes the counters, the per-second submits and the submit times (after a warm-up). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** What the simulator says about numbers submitted more than once (GET /repeats). */
export interface SimRepeats {
  /** Distinct destinations submitted since the last reset. */
  destinations: number;
  /** Destinations submitted more than once, the extra submit_sm, and those given two SMSC ids (sent twice). */
  repeated: number;
  extraSubmits: number;
  givenTwoIds: number;
  examples: string[];
}

/** `redeliverMs`: receipts whose deliver_sm was not acknowledged are sent again (0: never). */
export async function startSimulator(ctx: Ctx, redeliverMs = 0): Promise<Simulator> {
  const script = path.join(ctx.root, 'dist/scripts/bench/smsc-child.js');
  const { child, ready } = await spawnChild<{ port: number; controlPort: number }>({
    name: 'smsc simulator',
    args: [script, '--receipt-delay', String(ctx.opts.receiptDelayMs), '--smsc-ids', ctx.opts.smscIds, '--redeliver', String(redeliverMs)],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production' },
    cwd: ctx.root,
    logFile: path.join(ctx.runDir, 'smsc.log'),
    ready: (line) => {
      if (!line.startsWith('{"event":"listening"')) {
        return null;
      }
      return JSON.parse(line) as { port: number; controlPort: number };
    },
    readyTimeoutMs: 10_000,
  });
  const unregister = ctx.onCleanup(async () => {
    await stopChild(child, 5000);
  });
  const control = new Client(`http://127.0.0.1:${ready.controlPort}`, 2);
  return {
    port: ready.port,
    child,
    stats: async () => (await control.json<SimStats>('GET', '/stats')).body,
    lookup: async (destinations) =>
      (await control.json<{ times: Record<string, number | null> }>('POST', '/lookup', { destinations })).body.times,
    repeats: async () => (await control.json<SimRepeats>('GET', '/repeats')).body,
    reset: async () => {
      await control.json('POST', '/reset');
    },
    stop: async () => {
      await control.close().catch(() => undefined);
      await stopChild(child, 5000);
      unregister();
    },
  };
}
