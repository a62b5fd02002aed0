/**
 * A Viber connection's throughput cap (`mps`) holds across worker processes: the service runs as
 * `web` (it sends nothing), two `worker --pools=viber,status` child processes share its database
 * and Redis prefix and both send to the simulator. The simulator must see the cap's rate (within
 * 5 %) and never more than `mps` requests in any one-second window.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, it } from 'node:test';
import { statesKey } from '../../shared/carriers/connections.js';
import { REDIS_URL, startTestService, waitFor, type TestService } from '../support/harness.js';

const MPS = 50;
const RECIPIENTS = 500;
const TOKEN = 'tok-mps-0123456789abcdefghijklmn';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The simulator runs in a process of its own: the arrival times it records are not delayed by this process's work (the web service). */
let sim: { url: string; port: number; child: ChildProcess };
let svc: TestService;
const workers: Array<{ child: ChildProcess; output: string[] }> = [];

function startWorker(): { child: ChildProcess; output: string[] } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'worker', '--pools=viber,status'], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      DATABASE_URL: svc.databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: svc.prefix,
      SANDBOX: '0',
      MIGRATE_ON_START: '0',
      LOG_LEVEL: 'debug',
      PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  return { child, output };
}

async function stopWorker(w: { child: ChildProcess }): Promise<void> {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => w.child.once('exit', () => resolve()));
  w.child.kill('SIGTERM');
  const timer = setTimeout(() => w.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

/** Whether process `pid` holds a TCP connection to 127.0.0.1:`port` (Linux /proc). */
function connectedTo(pid: number, port: number): boolean {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && cols[2]!.endsWith(`:${hexPort}`) && inodes.has(cols[9]!)) return true;
    }
  }
  return false;
}

async function startSimulator(): Promise<typeof sim> {
  // No callback URL: only the sends are measured.
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/sim/viber/cli.ts', '--port', '0', '--dialect', 'official'], {
    cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout!.on('data', (d: Buffer) => {
      buffered += d.toString();
      if (buffered.includes('\n')) resolve(buffered.split('\n')[0]!);
    });
    child.once('exit', (code) => reject(new Error(`the simulator exited (${code})`)));
  });
  const { url, port } = JSON.parse(line) as { url: string; port: number };
  return { url, port, child };
}

async function simGet<T>(path: string): Promise<T> {
  const res = await fetch(`${sim.url}${path}`);
  return (await res.json()) as T;
}

/** The most times (ms) inside any window [t, t + 1000). */
function worstSecond(times: readonly number[]): number {
  let worst = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (j < times.length && times[j]! < times[i]! + 1000) j++;
    worst = Math.max(worst, j - i);
  }
  return worst;
}

before(async () => {
  sim = await startSimulator();
  svc = await startTestService({ role: 'web', env: { SANDBOX: '0' } });
  workers.push(startWorker(), startWorker());
});

after(async () => {
  await Promise.all(workers.map(stopWorker));
  await svc?.stop();
  sim?.child.kill('SIGTERM');
});

it(`never more than mps=${MPS} requests in any second across two worker processes, and the cap's rate`, { timeout: 90_000 }, async () => {
  const { apiKey, accountId } = await svc.createAccount({ credit_czk: 10000 });
  const created = await svc.admin('POST', '/carriers', { name: 'vm', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: TOKEN, mps: MPS } });
  assert.equal(created.status, 201, created.text);
  assert.equal((await svc.admin('POST', '/senders', { account_id: accountId, family: 'viber', sender: 'Shop', connection: 'vm', details: { service_id: 1001 } })).status, 201);
  try {
    // Each worker process publishes the state of the connections it runs.
    await waitFor(async () => Object.keys(await svc.runtime.redis.hgetall(statesKey(svc.prefix))).filter((f) => f.startsWith('vm\u0000')).length === 2,
      30_000, 'both worker processes run the connection');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${workers.map((w) => w.output.join('')).join('\n---\n')}`);
  }
  // Senders are picked up with the connection; give both processes' refresh a moment to have them.
  await new Promise((r) => setTimeout(r, 500));

  // A sender the account has not registered never reaches a connection (the sandbox is off).
  const unregistered = await svc.request('POST', '/v2/messages', { body: [{ body: 'x', to: [{ phone_number: '420777000100' }], flow: [{ viber: { sender: 'Nobody' } }] }], headers: { 'x-api-key': apiKey } });
  assert.equal(unregistered.status, 200, unregistered.text);
  const unregisteredId = unregistered.body.accepted[0].message_id as string;
  await waitFor(async () => (await svc.sql<{ result_info: string }>(
    `SELECT a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.state = 'rejected'`, [`${unregisteredId}-0`]))[0], 10_000, 'the rejection');
  const [rejection] = await svc.sql<{ result_info: string }>(
    'SELECT a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [`${unregisteredId}-0`]);
  assert.equal(rejection!.result_info, '[303] No route: sender "Nobody" is not registered for viber');

  // Warm-up: the worker processes' first sends (compiling code, opening connections) are not
  // what a cap is about; 50 recipients through the same path, then the simulator forgets them.
  const warm = await svc.request('POST', '/v2/messages', {
    body: Array.from({ length: 5 }, (_, o) => ({
      body: 'Warm-up', flow: [{ viber: { sender: 'Shop' } }],
      to: Array.from({ length: 10 }, (_, i) => ({ phone_number: `4207772${o}${i}000` })),
    })),
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(warm.status, 200, warm.text);
  await waitFor(async () => (await simGet<{ official: { accepted: number } }>('/_sim/stats')).official.accepted >= 50, 30_000, 'the warm-up');
  const reset = await fetch(`${sim.url}/_sim/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(reset.status, 200, await reset.text());
  await new Promise((r) => setTimeout(r, 1100)); // the warm-up leaves the send window

  // Every request the connection lets go is logged in its send window (Redis time, µs) for a
  // second; sampled often enough, that is the whole log of releases, in the cap's own clock.
  const released = new Map<string, number>();
  const [sec, usec] = await svc.runtime.redis.time();
  const fromMs = Number(sec) * 1000 + Number(usec) / 1000;
  const sample = async () => {
    const flat = await svc.runtime.redis.zrange(`${svc.prefix}:viber:vm:window`, '0', '-1', 'WITHSCORES');
    for (let i = 0; i < flat.length; i += 2) {
      const at = Number(flat[i + 1]) / 1000;
      if (at >= fromMs) released.set(flat[i]!, at); // the warm-up's are older
    }
  };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sample();
      await new Promise((r) => setTimeout(r, 150));
    }
  })();

  // Ten calls, so ten dispatch jobs that the two worker processes share.
  // Unique numbers ending in 00: accepted, no callbacks (none configured).
  const phones = Array.from({ length: RECIPIENTS }, (_, i) => `4207771${String(i).padStart(3, '0')}00`);
  const per = RECIPIENTS / 10;
  const responses = await Promise.all(Array.from({ length: 10 }, (_, k) => svc.request('POST', '/v2/messages', {
    // At most 10 recipients per message object; one call's objects travel as one job.
    body: Array.from({ length: per / 10 }, (_, o) => ({
      body: `Rate ${k}`, flow: [{ viber: { sender: 'Shop' } }],
      to: phones.slice(k * per + o * 10, k * per + o * 10 + 10).map((phone_number) => ({ phone_number })),
    })),
    headers: { 'x-api-key': apiKey },
  })));
  for (const res of responses) {
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.rejected.length, 0, res.text);
  }

  try {
    await waitFor(async () => (await simGet<{ official: { accepted: number } }>('/_sim/stats')).official.accepted >= RECIPIENTS, 40_000, `all ${RECIPIENTS} sends`);
  } catch (err) {
    const states = await svc.sql('SELECT state, result_info, count(*)::int AS n FROM attempts GROUP BY 1, 2');
    throw new Error(`${(err as Error).message}: ${JSON.stringify(await simGet('/_sim/stats'))} ${JSON.stringify(states)}\n${workers.map((w) => w.output.join('').slice(-3000)).join('\n---\n')}`);
  } finally {
    sampling = false;
    await sampler;
    await sample();
  }
  const { messages } = await simGet<{ messages: Array<{ at: number; seq: number }> }>(`/_sim/messages?limit=${RECIPIENTS + 10}`);
  const arrivals = messages.map((m) => m.at).sort((a, b) => a - b);
  assert.equal(arrivals.length, RECIPIENTS, `every recipient sent once: ${JSON.stringify(messages.filter((m) => !phones.includes((m as unknown as { to: string }).to)))}`);
  const releases = [...released.values()].sort((a, b) => a - b);
  assert.equal(releases.length, RECIPIENTS, 'every release logged');

  // The cap: no second of releases (Redis time, when each request was let go) above it. The
  // simulator's own clock is reported beside it: its arrival times also carry the scheduling of
  // its process and the workers' on a shared machine (a stalled process stamps a bunch at once).
  const worstReleases = worstSecond(releases);
  const worstArrivals = worstSecond(arrivals);
  // The rate while the cap binds: between the 10th and the 90th percentile of arrivals (the
  // first and last jobs ramp up and down).
  const n = arrivals.length;
  const rate = ((Math.floor((n * 9) / 10) - Math.floor(n / 10)) * 1000) / (arrivals[Math.floor((n * 9) / 10)]! - arrivals[Math.floor(n / 10)]!);
  const overall = ((n - 1) * 1000) / (arrivals[n - 1]! - arrivals[0]!);
  // eslint-disable-next-line no-console
  console.log(`mps ${MPS}: ${n} sends in ${((arrivals[n - 1]! - arrivals[0]!) / 1000).toFixed(2)} s (${overall.toFixed(2)}/s overall, ${rate.toFixed(2)}/s `
    + `from the 10th to the 90th percentile); most in any second: ${worstReleases} released (Redis clock), ${worstArrivals} arrived (simulator clock)`);
  assert.ok(worstReleases <= MPS, `at most ${MPS} requests released in any second, saw ${worstReleases}`);
  assert.ok(Math.abs(rate - MPS) <= MPS * 0.05, `rate ${rate.toFixed(2)}/s within 5 % of the cap of ${MPS}/s`);
  for (const w of workers) assert.ok(connectedTo(w.child.pid!, sim.port), `worker ${w.child.pid} sent to the simulator`);
  // The worker processes' logs (debug level) never show the connection's secret.
  const logged = workers.map((w) => w.output.join('')).join('');
  assert.ok(logged.includes('Viber connection started'));
  assert.ok(!logged.includes(TOKEN), 'no secret in the workers\' logs');
});
