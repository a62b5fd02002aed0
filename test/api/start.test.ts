/**
 * `switchboard start` (what `npm start` runs) as an operator meets it, with real processes on
 * loopback: it migrates, runs the Procfile's roles each in a child process with the node flags it
 * was given, a message sent through the sandbox is delivered and its webhooks arrive; a role killed
 * with SIGKILL is started again and work goes on; SIGTERM drains every role and exits 0; a killed
 * supervisor leaves nothing running (each role drains when its IPC channel closes). A taken
 * PORT is refused before any role starts; a role that fails its start three times in a row (here:
 * its METRICS_PORT is taken) stops every role, exit 1, the role and the reason in the log.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, deleteRedisPrefix, uniqueName, ADMIN_TOKEN, REDIS_URL } from '../support/harness.js';
import { stopChild } from '../support/processes.js';
import { PROCFILE_PROCESSES } from '../../services/start.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NODE_FLAGS = readFileSync(new URL('../../scripts/node-flags', import.meta.url), 'utf8').trim().split(/\s+/);
const NAMES = PROCFILE_PROCESSES.map((p) => p.name);

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

interface Line {
  level?: number;
  msg?: string;
  process?: string;
  pid?: number;
  [key: string]: unknown;
}

interface Supervisor {
  child: ChildProcess;
  lines: Line[];
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Waits (up to `ms`) for a log line `match` accepts; fails with the output so far. */
  line(match: (l: Line) => boolean, what: string, ms?: number): Promise<Line>;
  /** The pid of every role that logged `switchboard started` (the latest of each). */
  pids(): Map<string, number>;
}

async function freshEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  const db = await createTestDatabase();
  const prefix = uniqueName('sbt');
  cleanups.push(async () => {
    await db.drop();
    await deleteRedisPrefix(prefix);
  });
  return {
    NODE_ENV: 'test', PORT: '0', DATABASE_URL: db.url, REDIS_URL, REDIS_PREFIX: prefix, ADMIN_TOKEN, LOG_LEVEL: 'info',
    WEBHOOK_LINGER_MS: '100', ...extra,
  };
}

/** `node <scripts/node-flags> bin/switchboard.ts start`, as npm start runs it (through tsx here: no build). */
function startSupervisor(env: Record<string, string>): Supervisor {
  const child = spawn(process.execPath, ['--import', 'tsx', ...NODE_FLAGS, 'bin/switchboard.ts', 'start'], {
    cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Line[] = [];
  let raw = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    raw += d;
    let nl: number;
    while ((nl = raw.indexOf('\n')) >= 0) {
      const text = raw.slice(0, nl);
      raw = raw.slice(nl + 1);
      try {
        lines.push(JSON.parse(text) as Line);
      } catch {
        lines.push({ msg: `(not JSON) ${text}` });
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  // 'close', not 'exit': the supervisor's last lines may still be in the pipe when it has exited.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  const sup: Supervisor = {
    child, lines, exited,
    stderr: () => stderr,
    line: async (match, what, ms = 90_000) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        if (Date.now() > deadline || child.exitCode !== null) {
          assert.fail(`${what} not seen (exit ${child.exitCode}):\n${lines.slice(-30).map((l) => JSON.stringify(l)).join('\n')}\nstderr:\n${stderr.slice(-3000)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    pids: () => {
      const pids = new Map<string, number>();
      for (const l of lines) if (l.msg === 'switchboard started' && l.process && l.pid) pids.set(l.process, l.pid);
      return pids;
    },
  };
  // Whatever a failed test leaves: the supervisor, then each child it started, by pid.
  cleanups.push(async () => {
    await stopChild(child, 5_000);
    for (const pid of sup.pids().values()) killPid(pid);
  });
  return sup;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

async function waitFor<T>(fn: () => Promise<T | null> | T | null, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== null && value !== false) return value;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `p`, or 'hung' after `ms` (the timer does not keep the test file running). */
function within<T>(p: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<'hung'>((r) => {
    timer = setTimeout(() => r('hung'), ms);
  })]).finally(() => clearTimeout(timer));
}

/** A listener on `port` (0: any free one), closed after the file's tests. */
async function hold(port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => resolve());
  });
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  cleanups.push(close);
  return { port: (server.address() as net.AddressInfo).port, close };
}

/** A run of free ports for the roles' METRICS_PORTs, the second one held (taken). */
/**
 * Where the kernel's ephemeral ports start (the local ports of outgoing connections): ports below
 * it are free until someone listens on them. A run of ports inside the range can be taken between
 * the probe and a role's start by any process's connection to Postgres or Redis, and that role then
 * fails its start instead of the one the test holds a port for (seen once in CI).
 */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 21_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

async function metricsPorts(): Promise<{ base: number; taken: { port: number } }> {
  const below = ephemeralStart() - NAMES.length;
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * (below - 20_000));
    const probes: Array<{ close(): Promise<void> }> = [];
    try {
      for (let i = 0; i < NAMES.length; i++) if (i !== 1) probes.push(await hold(base + i));
      const taken = await hold(base + 1);
      for (const p of probes) await p.close();
      return { base, taken };
    } catch {
      for (const p of probes) await p.close();
    }
  }
  throw new Error('no run of free ports found');
}

/** A webhook receiver on loopback: every event it got. */
async function receiver(): Promise<{ url: string; events: Array<{ result?: string; payload?: { n?: number } }> }> {
  const events: Array<{ result?: string; payload?: { n?: number } }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => {
      body += d;
    }).on('end', () => {
      events.push(...(JSON.parse(body) as typeof events));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hooks`, events };
}

test('npm start\'s supervisor: every role in its own process, a message delivered, a killed role restarted, SIGTERM drains all', { timeout: 300_000 }, async () => {
  const sup = startSupervisor(await freshEnv());
  const started = await sup.line((l) => l.msg === 'every process started', 'every process started');
  const pids = started.processes as Record<string, number>;
  assert.deepEqual(Object.keys(pids), NAMES, 'the Procfile\'s roles');
  assert.equal(new Set([...Object.values(pids), sup.child.pid]).size, NAMES.length + 1, 'each role in a process of its own');
  for (const [name, pid] of Object.entries(pids)) {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    for (const flag of NODE_FLAGS) assert.ok(cmdline.includes(flag), `${name} runs with ${flag}: ${cmdline.join(' ')}`);
    // The role's log line and its IPC "started" travel apart (stdout vs the IPC channel): wait for the line.
    await sup.line((l) => l.process === name && l.pid === pid && l.msg === 'switchboard started', `${name}'s lines name it`, 10_000);
  }
  assert.ok(sup.lines.some((l) => l.process === 'supervisor' && l.msg === 'migrations applied'), 'the supervisor migrated once');
  assert.ok(!sup.lines.some((l) => l.process !== 'supervisor' && l.msg === 'migrations applied'), 'the roles did not migrate');
  const port = (await sup.line((l) => l.process === 'web' && l.msg === 'HTTP listening', 'HTTP listening')).port as number;
  const base = `http://127.0.0.1:${port}`;
  assert.equal((await fetch(`${base}/health/ready`)).status, 200);

  // The README's first message: an account, a message to a number the sandbox delivers, webhooks.
  const rx = await receiver();
  const created = await fetch(`${base}/admin/api/accounts`, {
    method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ currency: 'CZK', credit_czk: 100 }),
  });
  assert.equal(created.status, 201);
  const { api_key: apiKey } = await created.json() as { api_key: string };
  const send = async (n: number) => {
    const res = await fetch(`${base}/v2/messages`, {
      method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: JSON.stringify([{ body: `Hello ${n}`, to: [{ phone_number: '+420 777 123 400' }], callback: rx.url, payload: { n } }]),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const answer = await res.json() as { accepted: unknown[] };
    assert.equal(answer.accepted.length, 1);
  };
  const delivered = (n: number) => waitFor(() => rx.events.some((e) => e.payload?.n === n && e.result === 'delivered'), 60_000, `message ${n} delivered (webhook)`);
  await send(1);
  await delivered(1);
  const carried = await fetch(`${base}/sandbox/messages?phone_number=420777123400`, { headers: { 'x-api-key': apiKey } });
  assert.equal(carried.status, 200);
  assert.match(await carried.text(), /Hello 1/);

  // kill -9 of the SMS worker: restarted (a warning naming it and how it died), and work goes on.
  const victim = 'worker_sms';
  process.kill(pids[victim]!, 'SIGKILL');
  const warned = await sup.line((l) => l.child === victim && l.level === 40 && l.signal === 'SIGKILL', 'the warning about the killed role');
  assert.equal(warned.process, 'supervisor');
  assert.equal(warned.childPid, pids[victim]);
  assert.match(warned.msg!, /worker_sms exited unexpectedly \(killed by SIGKILL\); restarting it in 500 ms/);
  await waitFor(() => (sup.pids().get(victim) !== pids[victim] ? true : null), 60_000, 'worker_sms started again');
  assert.ok(sup.pids().get(victim)! !== pids[victim]);
  await send(2);
  await delivered(2);
  for (const name of NAMES.filter((n) => n !== victim)) assert.equal(sup.pids().get(name), pids[name], `${name} was left alone`);

  // SIGTERM: every role drains and is gone, the supervisor exits 0.
  const everyPid = [...sup.pids().values()];
  sup.child.kill('SIGTERM');
  const exit = await within(sup.exited, 60_000);
  assert.deepEqual(exit, { code: 0, signal: null }, sup.stderr().slice(-3000));
  for (const pid of everyPid) assert.equal(alive(pid), false, `pid ${pid} is gone`);
  for (const name of NAMES) assert.ok(sup.lines.some((l) => l.process === name && l.msg === 'switchboard stopped'), `${name} drained`);
  assert.ok(sup.lines.some((l) => l.process === 'supervisor' && l.msg === 'switchboard stopped'));
});

test('a supervisor killed with SIGKILL: every role notices its IPC channel close, drains and exits', { timeout: 180_000 }, async () => {
  const sup = startSupervisor(await freshEnv());
  const pids = (await sup.line((l) => l.msg === 'every process started', 'every process started')).processes as Record<string, number>;
  sup.child.kill('SIGKILL');
  for (const [name, pid] of Object.entries(pids)) {
    await waitFor(() => !alive(pid), 60_000, `${name} (pid ${pid}) gone`);
    assert.ok(sup.lines.some((l) => l.process === name && l.msg === 'shutting down' && l.signal === 'supervisor gone'), `${name} drained`);
  }
});

test('a taken PORT: refused before any role starts, exit 1 with the port in the message', { timeout: 120_000 }, async () => {
  const taken = await hold(0);
  const sup = startSupervisor(await freshEnv({ PORT: String(taken.port) }));
  const exit = await within(sup.exited, 90_000);
  assert.deepEqual(exit, { code: 1, signal: null }, sup.stderr().slice(-3000));
  assert.match(sup.stderr(), new RegExp(`^PORT: port ${taken.port} is already in use`, 'm'));
  assert.doesNotMatch(sup.stderr(), /\n\s+at /, 'a message, not a stack trace');
  assert.equal(sup.pids().size, 0, 'no role was started');
});

test('a role that fails its start three times in a row (its METRICS_PORT taken): every role stopped, exit 1 naming it and why', { timeout: 240_000 }, async () => {
  // METRICS_PORT=base: web takes base, worker_sms base + 1 (held here), the others the next ports.
  const { base, taken } = await metricsPorts();
  const victim = NAMES[1]!;
  const sup = startSupervisor(await freshEnv({ METRICS_PORT: String(base) }));
  const t0 = Date.now();
  const exit = await within(sup.exited, 200_000);
  const seconds = (Date.now() - t0) / 1000;
  assert.deepEqual(exit, { code: 1, signal: null }, sup.stderr().slice(-3000));
  const gaveUp = sup.lines.find((l) => l.level === 50 && l.process === 'supervisor');
  assert.ok(gaveUp, sup.lines.map((l) => JSON.stringify(l)).join('\n'));
  assert.equal(gaveUp.child, victim);
  assert.match(gaveUp.msg!, new RegExp(`^${victim} could not start \\(3 attempts in a row\\): METRICS_PORT: port ${taken.port} is already in use .*; stopping every process$`));
  const warnings = sup.lines.filter((l) => l.level === 40 && l.child === victim).map((l) => l.msg);
  assert.deepEqual(warnings, [500, 1000].map((ms) => `${victim} exited unexpectedly (exit code 1); restarting it in ${ms} ms`), 'two restarts first');
  assert.match(sup.stderr(), new RegExp(`^${victim}: METRICS_PORT: port ${taken.port} is already in use`, 'm'), 'its stderr, with its name in front');
  assert.match(sup.stderr(), new RegExp(`^switchboard start: ${victim} could not start \\(3 attempts in a row, the last exit code 1\\): METRICS_PORT: port ${taken.port} is already in use`, 'm'));
  assert.ok(sup.lines.some((l) => l.process === 'supervisor' && l.msg === 'stopping every process'));
  for (const pid of sup.pids().values()) assert.equal(alive(pid), false, `pid ${pid} is gone`);
  assert.ok(!sup.pids().has(victim));
  assert.ok(seconds < 180, `gave up after ${seconds} s`);
});

test('unreachable Postgres: the release step says so and starts nothing', { timeout: 60_000 }, async () => {
  const sup = startSupervisor({ NODE_ENV: 'test', PORT: '0', DATABASE_URL: 'postgres://127.0.0.1:1/switchboard', REDIS_URL, LOG_LEVEL: 'info' });
  const exit = await sup.exited;
  assert.deepEqual(exit, { code: 1, signal: null });
  assert.match(sup.stderr(), /Cannot reach PostgreSQL at postgres:\/\/\S*127\.0\.0\.1:1\/switchboard/);
  assert.equal(sup.pids().size, 0);
});
