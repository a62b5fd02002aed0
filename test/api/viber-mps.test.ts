/**
 * A Viber connection's throughput cap (`mps`) holds across worker processes: the service runs as
 * `web` (it sends nothing), two `worker --pools=viber,status` child processes share its database
 * and Redis prefix and both send to the simulator (a child process too). The simulator sees the
 * cap's rate (within 5 %), never a cap per process, and both processes sent.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, it } from 'node:test';
import { statesKey } from '../../shared/carriers/connections.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { fittedRate, worstWindow } from '../support/rates.js';
import { startWorkerProcess, stopWorkerProcess, type WorkerProcess } from '../support/worker-process.js';

const MPS = 50;
const RECIPIENTS = 500;
const TOKEN = 'tok-mps-0123456789abcdefghijklmn';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The simulator runs in a process of its own: the arrival times it records are not delayed by this process's work (the web service). */
let sim: { url: string; port: number; child: ChildProcess };
let svc: TestService;
const workers: WorkerProcess[] = [];

const startWorker = (): WorkerProcess => startWorkerProcess(svc, ['--pools=viber,status'], { SANDBOX: '0', LOG_LEVEL: 'debug' });

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

before(async () => {
  sim = await startSimulator();
  svc = await startTestService({ role: 'web', env: { SANDBOX: '0' } });
  workers.push(startWorker(), startWorker());
});

after(async () => {
  await Promise.all(workers.map(stopWorkerProcess));
  await svc?.stop();
  sim?.child.kill('SIGTERM');
});

it(`the cap of mps=${MPS} requests per second holds across two worker processes`, { timeout: 90_000 }, async (t) => {
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
  }
  const { messages } = await simGet<{ messages: Array<{ at: number; seq: number }> }>(`/_sim/messages?limit=${RECIPIENTS + 10}`);
  const arrivals = messages.map((m) => m.at).sort((a, b) => a - b);
  assert.equal(arrivals.length, RECIPIENTS, `every recipient sent once: ${JSON.stringify(messages.filter((m) => !phones.includes((m as unknown as { to: string }).to)))}`);
  const n = arrivals.length;
  // The steady rate: fitted from the first send after the first second's budget (which may go at once).
  const rate = fittedRate(arrivals.slice(MPS));
  const worst = worstWindow(arrivals);
  t.diagnostic(`mps ${MPS}: ${n} sends over ${arrivals[n - 1]! - arrivals[0]!} ms, ${rate.toFixed(2)}/s, at most ${worst} in one second (simulator clock)`);
  // A cap kept per process would double it.
  assert.ok(Math.abs(rate - MPS) <= MPS * 0.05, `rate ${rate.toFixed(2)}/s within 5 % of the cap of ${MPS}/s`);
  // The bucket keeps every second of token takes at the cap, across processes (exactly:
  // smpp-tps-lease.test.ts). A request reaches the simulator after its process's event loop lets
  // it go, and the simulator stamps it when its own loop gets to it: on this machine (2 cores
  // shared by several agents, load average 10-20) a stalled process sends or stamps a few at once
  // (seen: up to 61 at a cap of 50, mostly in the first second). The bound allows that and still
  // fails a cap kept per process.
  assert.ok(worst <= MPS + MPS / 2, `at most ${MPS}+${MPS / 2} sends in any second, saw ${worst}`);
  for (const w of workers) assert.ok(connectedTo(w.child.pid!, sim.port), `worker ${w.child.pid} sent to the simulator`);
  // The worker processes' logs (debug level) never show the connection's secret.
  const logged = workers.map((w) => w.output.join('')).join('');
  assert.ok(logged.includes('Viber connection started'));
  assert.ok(!logged.includes(TOKEN), 'no secret in the workers\' logs');
});
