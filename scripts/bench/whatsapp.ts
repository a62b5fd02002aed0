/**
 * e2e-whatsapp: the whole WhatsApp path. Accept (`whatsapp_template` steps) → dispatch → Graph
 * send at the WhatsApp simulator (a child process of its own) → signed status webhooks to
 * `/callbacks/whatsapp/bench` → the status path → our sentMessage webhooks at a local receiver.
 * Every recipient must get exactly its events (numbers ending 01: sent then failed 131026; 03:
 * sent only; the rest: sent, delivered, read). The connection and its sender are stored through
 * the admin API with the per-number cap raised (one business number carries the whole run).
 * CPU per recipient is reported per process group like e2e-smpp, the simulator apart.
 *
 * With `--kill-one` the run SIGKILLs the first copy of every worker role once a third of the events
 * arrived and starts each again after `--restart-pause` (as e2e-smpp's kill run), then checks what a
 * crash may and may not do here: every recipient still gets its events (a repeat is counted, not
 * wrong: at least once, D4); Meta is sent a recipient twice at most for the sends a killed process
 * had in flight or answered but not yet remembered (docs/whatsapp.md, "What a crash can repeat");
 * no attempt is charged twice; and every attempt still waiting holds its ttl timer.
 */
import path from 'node:path';
import { Meter, costPer, workPer, writesPer } from './meter.js';
import { Client, percentiles, runBounded, sleep } from './load.js';
import { Receiver, byPhone } from './receiver.js';
import { createAccount, startService, type Ctx, type Service } from './stack.js';
import { settledChecks } from './timers-check.js';
import { spawnChild, stopChild, type Child } from './procs.js';
import { DEFAULT_SEED } from '../sim/whatsapp/seed.js';
import type { SendCounts } from '../sim/whatsapp/state.js';
import {
  KILL_STALL_MS, backlogPhone, checkEvents, expectedResults, finish, killVariant, maybeKill, noteExits, r1, rate, runsLane, runsPool, serviceFindings, serviceRole, somethingDied,
  startPgSampler, waitWithStall, warmupPhone, type ScenarioResult,
} from './scenarios.js';

const CONNECTION = 'bench';
const PHONE_NUMBER_ID = DEFAULT_SEED.numbers[0]!.id;
const TOKEN = DEFAULT_SEED.tokens[0]!.token;
const WABA = DEFAULT_SEED.numbers[0]!.waba_id;
/** The run's cap per business number: far above what one machine sends, so it never binds. */
const BENCH_MPS = 100_000;
/** The Graph client's connections per process (shared/carriers/http-client.ts): its sends in flight at most. */
const GRAPH_CONNECTIONS = 32;

export interface GraphSendCheck {
  passed: boolean;
  /** Numbers Meta took a send to, against the recipients. */
  destinations: number;
  recipients: number;
  /** Numbers taken more than once, and the sends beyond one each. */
  repeated: number;
  extraSends: number;
  /** Extra sends allowed: 0, or after a kill, in flight (the client's connections) plus answered and not yet in Redis (as many), per killed process that sent the run's WhatsApp messages. */
  allowed: number;
  examples: Array<[string, number]>;
  detail: string;
}

function graphSendCheck(counts: SendCounts, recipients: number, killedSenders: number): GraphSendCheck {
  const allowed = killedSenders * 2 * GRAPH_CONNECTIONS;
  const extraSends = counts.sends - counts.destinations;
  const passed = counts.counting && counts.destinations === recipients && extraSends <= allowed && !counts.truncated;
  const detail = `${counts.destinations}/${recipients} recipients sent to Meta; ${counts.repeatedCount} more than once (${extraSends} extra sends)` +
    `${killedSenders > 0 ? `; extra sends allowed after the kill: ${allowed} (2 × ${GRAPH_CONNECTIONS} connections × ${killedSenders} killed WhatsApp processes)` : ''}`;
  return { passed, destinations: counts.destinations, recipients, repeated: counts.repeatedCount, extraSends, allowed, examples: counts.repeated.slice(0, 10), detail };
}

/**
 * What the simulator's outcome table gives a number (scripts/sim/whatsapp/outcomes.ts), as events:
 * the SMS table's for 01 (sent, then failed 131026) and 03 (sent only); `read` after `delivered`
 * for the rest.
 */
export function whatsappExpected(phone: string): string[] {
  const sms = expectedResults(phone);
  return sms[sms.length - 1] === 'delivered' ? [...sms, 'seen'] : sms;
}

/** `phones.length / 10` message objects of 10 recipients each with one template step, as one /v2/messages body. */
function templateBody(phones: string[], callback: string): string {
  const step = JSON.stringify([{ whatsapp_template: { sender: PHONE_NUMBER_ID, template_name: 'hello_world' } }]);
  const objects: string[] = [];
  for (let o = 0; o < phones.length; o += 10) {
    const to = phones.slice(o, o + 10).map((p) => `{"phone_number":"+${p}"}`).join(',');
    objects.push(`{"flow":${step},"to":[${to}],"callback":${JSON.stringify(callback)}}`);
  }
  return `[${objects.join(',')}]`;
}

interface Sim {
  url: string;
  child: Child;
  control: Client;
  stop(): Promise<void>;
}

async function startGraphSimulator(ctx: Ctx, callbackUrl: string): Promise<Sim> {
  const { child, ready } = await spawnChild<{ url: string }>({
    name: 'whatsapp simulator',
    args: [path.join(ctx.root, 'dist/scripts/bench/whatsapp-child.js'), '--callback-url', callbackUrl],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production' },
    cwd: ctx.root,
    logFile: path.join(ctx.runDir, 'whatsapp-sim.log'),
    ready: (line) => (line.startsWith('{"event":"listening"') ? JSON.parse(line) as { url: string } : null),
    readyTimeoutMs: 10_000,
  });
  const unregister = ctx.onCleanup(async () => {
    await stopChild(child, 5000);
  });
  const control = new Client(ready.url, 2);
  return {
    url: ready.url, child, control,
    stop: async () => {
      await control.close().catch(() => undefined);
      await stopChild(child, 5000);
      unregister();
    },
  };
}

/** The connection and sender through the admin API, the handshake, and the route in every worker. */
async function configure(ctx: Ctx, service: Service, sim: Sim, accountId: number): Promise<void> {
  const admin = service.admin;
  const put = await admin.json('PUT', '/admin/api/prices', [{ channel: 'whatsapp_template', prefix: '', price_czk: 0.5, price_eur: 0.02 }]);
  if (put.status !== 200) throw new Error(`prices: ${put.status} ${JSON.stringify(put.body)}`);
  const conn = await admin.json('POST', '/admin/api/carriers', {
    name: CONNECTION, kind: 'whatsapp',
    config: { graph_url: sim.url, app_id: DEFAULT_SEED.app.id, app_secret: DEFAULT_SEED.app.secret, verify_token: DEFAULT_SEED.app.verify_token, per_number_mps: BENCH_MPS },
  });
  if (conn.status !== 201) throw new Error(`connection: ${conn.status} ${JSON.stringify(conn.body)}`);
  const sender = await admin.json('POST', '/admin/api/senders', {
    account_id: accountId, family: 'whatsapp', sender: PHONE_NUMBER_ID, connection: CONNECTION, credentials: { access_token: TOKEN }, details: { waba_id: WABA },
  });
  if (sender.status !== 201) throw new Error(`sender: ${sender.status} ${JSON.stringify(sender.body)}`);
  const verified = await sim.control.json<{ ok: boolean; error?: string }>('POST', '/_sim/verify', {});
  if (!verified.body.ok) throw new Error(`the webhook handshake failed: ${verified.body.error ?? verified.status}`);
  // Worker processes read stored connections every 5 s; the route exists once one runs it.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const list = await admin.json<{ carriers: Array<{ name: string; state: string }> }>('GET', '/admin/api/carriers');
    if (list.body.carriers.some((c) => c.name === CONNECTION && c.state === 'ready')) break;
    if (Date.now() > deadline) throw new Error('no worker runs the WhatsApp connection after 20 s');
    await sleep(200);
  }
  // The sender rows come with the same refresh, or with the next one.
  await sleep(serviceRole(ctx) === 'all' ? 200 : 5500);
}

export async function e2eWhatsappScenario(ctx: Ctx): Promise<ScenarioResult> {
  const { opts } = ctx;
  const notes: string[] = [];
  const service = await startService(ctx, { label: 'wa', role: serviceRole(ctx), sandbox: false });
  const receiver = new Receiver('e2e-whatsapp', byPhone);
  const clients: Client[] = [];
  let sim: Sim | null = null;
  try {
    await receiver.start();
    sim = await startGraphSimulator(ctx, `${service.url}/callbacks/whatsapp/${CONNECTION}`);
    const account = await createAccount(service);
    await configure(ctx, service, sim, account.accountId);
    const client = new Client(service.url, opts.concurrency, { 'x-api-key': account.apiKey });
    clients.push(client);

    let warmup: { recipients: number; seconds: number; complete: boolean } | null = null;
    if (opts.warmup > 0) {
      const phones = Array.from({ length: opts.warmup }, (_, k) => warmupPhone(k));
      const expected = phones.reduce((a, p) => a + whatsappExpected(p).length, 0);
      const started = Date.now();
      const deadline = started + 60_000 + opts.warmup * 10;
      await runBounded(opts.concurrency, Math.ceil(phones.length / 100), deadline, async (i) => {
        await client.request('POST', '/v2/messages', templateBody(phones.slice(i * 100, i * 100 + 100), receiver.url));
      });
      const complete = await waitWithStall(receiver, expected, deadline, opts.quick ? 8000 : 30_000);
      await sleep(opts.quick ? 200 : 500);
      warmup = { recipients: phones.length, seconds: r1((Date.now() - started) / 1000), complete };
      if (!complete) notes.push(`the warm-up's ${phones.length} recipients did not all get their events within ${warmup.seconds} s`);
      receiver.reset();
    }
    await sim.control.json('POST', '/_sim/sends/reset', {});
    const measuredFrom = (await service.db.pool.query<{ at: Date }>('SELECT clock_timestamp() AS at')).rows[0]!.at;

    const n = opts.recipients;
    const phones = Array.from({ length: n }, (_, i) => backlogPhone(i));
    const bodies: string[] = [];
    for (let i = 0; i < n; i += 100) bodies.push(templateBody(phones.slice(i, i + 100), receiver.url));
    const expectedEvents = phones.reduce((a, p) => a + whatsappExpected(p).length, 0);
    const groups: Record<string, number[]> = { ...service.groups, simulator: [sim.child.pid] };
    const rssPids: Record<string, number> = { ...service.rssPids, simulator: sim.child.pid };
    const meter = new Meter(groups, new Set([service.db.name]), ctx.redis, rssPids, service.db.url);
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
      const res = await client.request('POST', '/v2/messages', bodies[i]);
      acceptLatencies.push(res.ms);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 200) accepted += 100;
      lastAcceptAt = Date.now();
    });
    const progress = setInterval(() => {
      void (async () => {
        const s = await sim!.control.json<{ webhooks: { posts: number; delivered: number } }>('GET', '/_sim/state').catch(() => null);
        ctx.log(`e2e-whatsapp +${Math.round((Date.now() - t0) / 1000)} s: accepted ${accepted}/${n}` +
          `${s ? `, status webhooks posted ${s.body.webhooks.posts}` : ''}, our events ${receiver.events}/${expectedEvents}`);
      })();
    }, 5000);
    // --kill-one: the first copy of every worker role SIGKILLed once a third of the events arrived.
    const { killed, done: killDone } = maybeKill(killOne, service, receiver, expectedEvents, deadline, opts.restartPauseMs, t0, notes);
    let complete: boolean;
    try {
      await backlogDone;
      const simChild = sim.child;
      complete = await waitWithStall(receiver, expectedEvents, deadline, killOne ? KILL_STALL_MS : opts.quick ? 8000 : 30_000, () => somethingDied(service, simChild), true);
      await killDone;
      await noteExits(service, simChild, notes);
    } finally {
      clearInterval(progress);
    }
    const lastEventAt = receiver.lastAt;
    const cpu = await meter.stop();
    const pgActivity = await pgSampler.stop('e2e-whatsapp');
    const rss = meter.rssSummary();
    if (!complete) {
      notes.push(`stopped waiting after ${Math.round((Date.now() - t0) / 1000)} s with ${receiver.distinct} of ${expectedEvents} events ` +
        `(${receiver.events} received with repeats)`);
    }
    await sleep(opts.quick ? 500 : 1500); // late duplicates would arrive now
    const check = checkEvents(receiver, phones, false, whatsappExpected, killOne);
    if (check.repeatedEvents > 0) notes.push(`${check.repeatedEvents} webhook events delivered again after the kill (at least once, D4; not counted as wrong)`);
    // The run's messages have no tag: the promotional lane (D2).
    const killedSenders = service.processes.filter((p) => p.kills.length > 0 && runsPool(p.args, 'whatsapp') && runsLane(p.args, 'promotional')).length;
    const sendCounts = await sim.control.json<SendCounts>('GET', '/_sim/sends');
    const sendCheck = graphSendCheck(sendCounts.body, n, killedSenders);
    if (!sendCheck.passed) notes.push(sendCheck.detail);
    const settled = await settledChecks(service.db.pool, ctx.redis, service.prefix, account.accountId, measuredFrom, notes);

    const db = service.db.pool;
    // Attempts with a registered wamid (a send Meta took twice registers two, one attempt).
    const { rows: [sends] } = await db.query<{ n: string; last: string | null }>(
      `SELECT count(DISTINCT attempt_id) AS n, (extract(epoch FROM max(created_at)) * 1000)::bigint AS last
         FROM carrier_refs WHERE carrier = $1 AND created_at >= $2`,
      [`whatsapp.${CONNECTION}`, measuredFrom]);
    const { rows: states } = await db.query<{ state: string; n: string }>(
      'SELECT state, count(*) AS n FROM attempts WHERE created_at >= $1 GROUP BY state ORDER BY state', [measuredFrom]);
    const { rows: [batches] } = await db.query<{ n: string; events: string | null }>(
      'SELECT count(*) AS n, avg(cardinality(event_ids)) AS events FROM webhook_batches WHERE created_at >= $1', [measuredFrom]);
    const simState = await sim.control.json<{ webhooks: Record<string, number> }>('GET', '/_sim/state').catch(() => null);
    const done = await finish(ctx, service, 'e2e-whatsapp', meter.window);
    const ms = (t: number) => (t > 0 ? t - t0 : 0);
    const graphSends = Number(sends!.n);
    // After a kill, a wamid Meta gave in the moment before the killed process wrote it to Redis
    // stays unregistered when its statuses move the attempt before the job runs again (the job
    // registers those it finds in Redis: docs/whatsapp.md, "What a crash can repeat"): at most what
    // the process had in flight, the bound of sendCheck.
    const registeredOk = killOne ? graphSends >= n - sendCheck.allowed : graphSends === n;
    if (graphSends !== n) notes.push(`${graphSends} wamids registered for ${n} recipients${killOne ? ` (after the kill: at least ${n - sendCheck.allowed} expected)` : ''}`);
    return {
      scenario: 'e2e-whatsapp',
      ok: check.passed && complete && registeredOk && (statuses['200'] ?? 0) === bodies.length &&
        sendCheck.passed && settled.charges.passed && settled.timersCheck.passed && killed.every((k) => k.upAgainAfterS !== null),
      notes,
      ...(killOne && { variant: killVariant(opts.restartPauseMs), killed }),
      processes: opts.processes,
      recipients: n,
      warmup,
      concurrency: opts.concurrency,
      perNumberMps: BENCH_MPS,
      accepted,
      acceptedPerS: rate(accepted, ms(lastAcceptAt)),
      acceptLatencyMs: percentiles(acceptLatencies),
      acceptStatuses: statuses,
      graphSends,
      graphSendsPerS: rate(graphSends, ms(Number(sends!.last ?? 0))),
      statusWebhooks: simState?.body.webhooks ?? null,
      webhookEvents: receiver.events,
      webhookEventsPerS: rate(receiver.events, ms(lastEventAt)),
      webhookPosts: receiver.posts,
      webhookBatches: Number(batches!.n),
      eventsPerBatch: r1(Number(batches!.events ?? 0)),
      recipientsPerSEndToEnd: rate(n, ms(lastEventAt)),
      secondsUntil: { lastAccept: r1(ms(lastAcceptAt) / 1000), lastGraphSend: r1(ms(Number(sends!.last ?? 0)) / 1000), lastEvent: r1(ms(lastEventAt) / 1000) },
      attempts: Object.fromEntries(states.map((s) => [s.state, Number(s.n)])),
      check,
      sendCheck,
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
    await sim?.stop();
  }
}
