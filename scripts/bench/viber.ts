/**
 * Scenario `e2e-viber`: recipients through the whole Viber path. `POST /v2/messages` (a one-step
 * `viber` flow) → dispatch → the `viber` connector (official dialect) → the Viber simulator in a
 * child process of its own (scripts/bench/viber-child.ts) → its delivered / seen / expired callbacks
 * to `/callbacks/viber/<connection>/<token>` on the web process → status → `sentMessage` webhooks at
 * the receiver. The connection and the sender are configured through the admin API, as an operator
 * would. Numbers are unique; their last two digits choose the simulator's outcome, so every
 * recipient's events are known in advance and checked exactly.
 *
 * With `--kill-one` the run is the kill run, as e2e-whatsapp's: the first copy of every worker role
 * SIGKILLed once a third of the events arrived and started again; every recipient must still get
 * its events (repeats counted, not wrong), no attempt charged twice, and every attempt still
 * waiting must hold its ttl timer. A send repeated after the kill is refused by Viber's official
 * dialect (`seq` is the attempt id), so the simulator's count of sends is not a check here.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Meter, costPer, workPer, writesPer } from './meter.js';
import { Client, percentiles, runBounded, sleep } from './load.js';
import { Receiver, byPhone } from './receiver.js';
import { createAccount, startService, type Ctx, type Service } from './stack.js';
import { spawnChild, stopChild, type Child } from './procs.js';
import {
  KILL_STALL_MS, checkEvents, finish, killVariant, maybeKill, noteExits, serviceFindings, somethingDied, startPgSampler, waitWithStall, type ScenarioResult,
} from './scenarios.js';
import { settledChecks } from './timers-check.js';

const r1 = (x: number) => Math.round(x * 10) / 10;
const rate = (n: number, ms: number) => (ms > 0 ? Math.round((n * 1000) / ms) : 0);
const pad6 = (i: number) => String(i).padStart(6, '0');

/**
 * Last two digits of recipient i (the simulator's table, docs/viber.md): 2 % expire (01), 2 % get
 * no callback (03), 2 % are not Viber users (04), 2 % are delivered on two devices (08), 2 % are
 * seen without a delivered receipt (10), the rest are delivered and seen (30…39).
 */
export function viberEndingOf(i: number): string {
  switch (i % 50) {
    case 1: return '01';
    case 3: return '03';
    case 4: return '04';
    case 8: return '08';
    case 10: return '10';
    default: return `3${i % 10}`;
  }
}

export const viberPhone = (i: number) => `4207${pad6(i)}${viberEndingOf(i)}`;
const viberWarmupPhone = (k: number) => `4206${pad6(500_000 + k)}${viberEndingOf(k)}`;

/** The sentMessage results each ending gives (D3 paths; duplicates and out-of-order receipts change nothing). */
export function viberExpected(phone: string): string[] {
  switch (phone.slice(-2)) {
    case '01':
      return ['sending', 'sent', 'undelivered'];
    case '03':
      return ['sending', 'sent'];
    case '04':
      return ['sending', 'undelivered'];
    default:
      return ['sending', 'sent', 'delivered', 'seen'];
  }
}

/** 10 message objects of 10 recipients each, one `viber` step, as one /v2/messages body. */
function viberBody(phones: string[], callback: string, text: string): string {
  const objects: string[] = [];
  for (let o = 0; o < phones.length; o += 10) {
    const to = phones.slice(o, o + 10).map((p) => `{"phone_number":"+${p}"}`).join(',');
    objects.push(`{"body":${JSON.stringify(text)},"to":[${to}],"flow":[{"viber":{"sender":"Bench"}}],"callback":${JSON.stringify(callback)}}`);
  }
  return `[${objects.join(',')}]`;
}

/** Recipients of the accepted objects of one answer (every object has 10). */
function acceptedRecipients(text: string): number {
  try {
    const body = JSON.parse(text) as { accepted?: unknown[] };
    return Array.isArray(body.accepted) ? body.accepted.length * 10 : 0;
  } catch {
    return 0;
  }
}

interface ViberSimStats {
  official: { requests: number; accepted: number; refused: number };
  callbacks: { posts: number; events: number; retries: number; failures: number; pending: number; dropped: number };
  firstSendAt: number;
  lastSendAt: number;
  sendsPerSecond: number[];
}

interface ViberSim {
  url: string;
  child: Child;
  control: Client;
  stats(): Promise<ViberSimStats>;
  post(path: string, body: unknown): Promise<void>;
  stop(): Promise<void>;
}

async function startViberSim(ctx: Ctx): Promise<ViberSim> {
  const { child, ready } = await spawnChild<{ host: string; port: number; controlPort: number }>({
    name: 'viber simulator',
    args: [path.join(ctx.root, 'dist/scripts/bench/viber-child.js'), '--callback-delay', String(ctx.opts.receiptDelayMs)],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production' },
    cwd: ctx.root,
    logFile: path.join(ctx.runDir, 'viber-sim.log'),
    ready: (line) => (line.startsWith('{"event":"listening"') ? JSON.parse(line) as { host: string; port: number; controlPort: number } : null),
    readyTimeoutMs: 10_000,
  });
  const unregister = ctx.onCleanup(async () => {
    await stopChild(child, 5000);
  });
  const control = new Client(`http://127.0.0.1:${ready.controlPort}`, 2);
  return {
    url: `http://${ready.host}:${ready.port}`,
    child,
    control,
    stats: async () => (await control.json<ViberSimStats>('GET', '/stats')).body,
    post: async (p, body) => {
      const res = await control.json('POST', p, body);
      if (res.status !== 200) throw new Error(`viber simulator ${p}: ${res.status} ${JSON.stringify(res.body)}`);
    },
    stop: async () => {
      await control.close().catch(() => undefined);
      await stopChild(child, 5000);
      unregister();
    },
  };
}

/** The connection and the account's sender, through the admin API; waits until the workers run them. */
async function configureViber(ctx: Ctx, service: Service, sim: ViberSim, accountId: number): Promise<void> {
  const token = randomBytes(24).toString('base64url');
  const carrier = await service.admin.json('POST', '/admin/api/carriers', {
    name: 'bench', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: token },
  });
  if (carrier.status !== 201) throw new Error(`storing the Viber connection failed: ${carrier.status} ${JSON.stringify(carrier.body)}`);
  const sender = await service.admin.json('POST', '/admin/api/senders', {
    account_id: accountId, family: 'viber', sender: 'Bench', connection: 'bench', details: { service_id: 1001 },
  });
  if (sender.status !== 201) throw new Error(`storing the Viber sender failed: ${sender.status} ${JSON.stringify(sender.body)}`);
  await sim.post('/config', { callbackUrl: `${service.url}/callbacks/viber/bench`, callbackToken: token });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const list = await service.admin.json<{ carriers: Array<{ name: string; state: string }> }>('GET', '/admin/api/carriers');
    if (list.body.carriers?.some((c) => c.name === 'bench' && c.state === 'ready')) break;
    if (Date.now() > deadline) throw new Error('the Viber connection did not become ready within 20 s');
    await sleep(200);
  }
  // A process that opened the connection just before the sender was stored picks it up on its
  // next refresh (every 5 s).
  ctx.log('viber connection ready; waiting one refresh for the sender rows');
  await sleep(5500);
}

export async function e2eViberScenario(ctx: Ctx): Promise<ScenarioResult> {
  const { opts } = ctx;
  const notes: string[] = [];
  const sim = await startViberSim(ctx);
  let service: Service;
  try {
    service = await startService(ctx, { label: 'viber', role: opts.processes, sandbox: false });
  } catch (err) {
    await sim.stop();
    throw err;
  }
  const receiver = new Receiver('viber', byPhone);
  const clients: Client[] = [];
  try {
    await receiver.start();
    const account = await createAccount(service);
    await configureViber(ctx, service, sim, account.accountId);

    // Warm-up: its own numbers through the same path, waited for and forgotten.
    let warmup: { recipients: number; seconds: number; complete: boolean } | null = null;
    if (opts.warmup > 0) {
      const started = Date.now();
      const phones = Array.from({ length: opts.warmup }, (_, k) => viberWarmupPhone(k));
      const expected = phones.reduce((a, p) => a + viberExpected(p).length, 0);
      const client = new Client(service.url, opts.concurrency, { 'x-api-key': account.apiKey });
      clients.push(client);
      const deadline = started + 60_000 + opts.warmup * 10;
      await runBounded(opts.concurrency, Math.ceil(phones.length / 100), deadline, async (i) => {
        await client.request('POST', '/v2/messages', viberBody(phones.slice(i * 100, i * 100 + 100), receiver.url, 'Warm-up'));
      });
      const complete = await waitWithStall(receiver, expected, deadline, opts.quick ? 8000 : 30_000);
      await sleep(opts.quick ? 200 : 500);
      receiver.reset();
      await sim.post('/reset', {});
      warmup = { recipients: phones.length, seconds: r1((Date.now() - started) / 1000), complete };
      if (!complete) notes.push(`the warm-up's ${phones.length} recipients did not all get their events within ${warmup.seconds} s`);
    }
    const measuredFrom = (await service.db.pool.query<{ at: Date }>('SELECT clock_timestamp() AS at')).rows[0]!.at;

    const n = opts.recipients;
    const phones = Array.from({ length: n }, (_, i) => viberPhone(i));
    const bodies: string[] = [];
    for (let i = 0; i < n; i += 100) bodies.push(viberBody(phones.slice(i, i + 100), receiver.url, 'Your weekly offer: 20 % off everything'));
    const expectedEvents = phones.reduce((a, p) => a + viberExpected(p).length, 0);

    const backlog = new Client(service.url, opts.concurrency, { 'x-api-key': account.apiKey });
    clients.push(backlog);
    const meter = new Meter({ ...service.groups, simulator: [sim.child.pid] }, new Set([service.db.name]), ctx.redis,
      { ...service.rssPids, simulator: sim.child.pid }, service.db.url);
    await meter.start();
    const pgSampler = await startPgSampler(ctx, service);
    const t0 = Date.now();
    const killOne = opts.killOne;
    const deadline = t0 + (opts.quick ? 20_000 : 60_000) + n * 10 + (killOne ? KILL_STALL_MS : 0);
    const acceptLatencies: number[] = [];
    const statuses: Record<string, number> = {};
    let accepted = 0;
    let lastAcceptAt = 0;
    const backlogDone = runBounded(opts.concurrency, bodies.length, deadline, async (i) => {
      const res = await backlog.request('POST', '/v2/messages', bodies[i]);
      acceptLatencies.push(res.ms);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 200) accepted += acceptedRecipients(res.text);
      lastAcceptAt = Date.now();
    });
    const progress = setInterval(() => {
      void sim.stats().then((s) => ctx.log(`e2e-viber +${Math.round((Date.now() - t0) / 1000)} s: accepted ${accepted}/${n}, ` +
        `sends ${s.official.requests}, callback events ${s.callbacks.events}, webhook events ${receiver.events}/${expectedEvents}`), () => undefined);
    }, 5000);
    // --kill-one: the first copy of every worker role SIGKILLed once a third of the events arrived.
    const { killed, done: killDone } = maybeKill(killOne, service, receiver, expectedEvents, deadline, opts.restartPauseMs, t0, notes);
    let complete: boolean;
    try {
      await backlogDone;
      complete = await waitWithStall(receiver, expectedEvents, deadline, killOne ? KILL_STALL_MS : opts.quick ? 8000 : 30_000, () => somethingDied(service, sim.child), true);
      await killDone;
      await noteExits(service, sim.child, notes);
    } finally {
      clearInterval(progress);
    }
    const lastEventAt = receiver.lastAt;
    const cpu = await meter.stop();
    const pgActivity = await pgSampler.stop('e2e-viber');
    const rss = meter.rssSummary();
    if (!complete) {
      notes.push(`stopped waiting after ${Math.round((Date.now() - t0) / 1000)} s with ${receiver.distinct} of ${expectedEvents} events ` +
        `(${receiver.events} received with repeats)`);
    }
    await sleep(opts.quick ? 500 : 1500); // late duplicates would arrive now
    const check = checkEvents(receiver, phones, false, viberExpected, killOne);
    if (check.repeatedEvents > 0) notes.push(`${check.repeatedEvents} webhook events delivered again after the kill (at least once, D4; not counted as wrong)`);
    const simStats = await sim.stats();
    const settled = await settledChecks(service.db.pool, ctx.redis, service.prefix, account.accountId, measuredFrom, notes);

    const db = service.db.pool;
    const { rows: states } = await db.query<{ state: string; n: string }>(
      'SELECT state, count(*) AS n FROM attempts WHERE created_at >= $1 GROUP BY state ORDER BY state', [measuredFrom]);
    const { rows: [finals] } = await db.query<{ n: string; last: string | null }>(
      `SELECT count(*) AS n, (extract(epoch FROM max(updated_at)) * 1000)::bigint AS last
         FROM attempts WHERE state IN ('seen', 'undelivered') AND created_at >= $1`, [measuredFrom]);
    const done = await finish(ctx, service, 'e2e-viber', meter.window);
    const ms = (t: number) => (t > 0 ? t - t0 : 0);
    const sends = simStats.official.requests;
    if (sends === 0) notes.push('no send reached the Viber simulator');
    return {
      scenario: 'e2e-viber',
      ok: check.passed && complete && sends > 0 && (statuses['200'] ?? 0) === bodies.length &&
        settled.charges.passed && settled.timersCheck.passed && killed.every((k) => k.upAgainAfterS !== null),
      notes,
      ...(killOne && { variant: killVariant(opts.restartPauseMs), killed }),
      dialect: 'official',
      processes: opts.processes,
      recipients: n,
      warmup,
      concurrency: opts.concurrency,
      callbackDelayMs: opts.receiptDelayMs,
      accepted,
      acceptedPerS: rate(accepted, ms(lastAcceptAt)),
      acceptLatencyMs: percentiles(acceptLatencies),
      acceptStatuses: statuses,
      sends,
      sendsPerS: rate(sends, simStats.lastSendAt > 0 ? simStats.lastSendAt - t0 : 0),
      peakSendsPerS: Math.max(0, ...simStats.sendsPerSecond),
      callbacks: simStats.callbacks,
      finalsApplied: Number(finals!.n),
      finalsAppliedPerS: rate(Number(finals!.n), ms(Number(finals!.last ?? 0))),
      webhookEvents: receiver.events,
      webhookEventsPerS: rate(receiver.events, ms(lastEventAt)),
      webhookPosts: receiver.posts,
      recipientsPerSEndToEnd: rate(n, ms(lastEventAt)),
      secondsUntil: {
        lastAccept: r1(ms(lastAcceptAt) / 1000),
        lastSend: r1((simStats.lastSendAt > 0 ? simStats.lastSendAt - t0 : 0) / 1000),
        lastEvent: r1(ms(lastEventAt) / 1000),
      },
      attempts: Object.fromEntries(states.map((s) => [s.state, Number(s.n)])),
      check,
      ...settled,
      cpu,
      cpuUsPerRecipient: costPer(cpu, n),
      writeSyscallsPerRecipient: writesPer(cpu, n),
      workPerRecipient: workPer(cpu, n),
      rss,
      ...serviceFindings(done, pgActivity),
    };
  } catch (err) {
    await service.stop().catch(() => undefined);
    throw err;
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await receiver.close();
    await sim.stop();
  }
}
