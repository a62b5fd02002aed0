/**
 * The five scenarios of issue 9. Each starts its own service (fresh database and Redis prefix),
 * measures one interval with a Meter and returns one JSON-able result per scenario.
 */
import { Meter, PgActivitySampler, costPer, workPer, writesPer, type CpuReport, type PgActivity, type RssSummary } from './meter.js';
import { Client, SpreadClient, percentiles, runBounded, sleep, type Percentiles } from './load.js';
import { Receiver, byMessageId, byPhone, waitForAll } from './receiver.js';
import { BENCH_CREDIT_CZK, createAccount, startService, startSimulator, type Ctx, type Service, type SimRepeats, type Simulator } from './stack.js';
import { resolveCarrier, type Options } from './options.js';
import { tpsOf, type CopiesSpec } from './copies.js';
import { chargeFigures, type ChargeFigures } from './charges.js';
import { summariseProfile, formatProfile, type ProfileSummary } from './profile.js';
import { processRssBytes, spawnChild, type Child } from './procs.js';
import path from 'node:path';

export interface ScenarioResult {
  scenario: string;
  ok: boolean;
  skipped?: boolean;
  notes: string[];
  [field: string]: unknown;
}

export const r1 = (x: number) => Math.round(x * 10) / 10;
export const rate = (n: number, ms: number) => (ms > 0 ? Math.round((n * 1000) / ms) : 0);
const pad6 = (i: number) => String(i).padStart(6, '0');

// ---------------------------------------------------------------------------------------------
// Numbers and their known outcomes (D10 table; the simulator uses the same endings)
// ---------------------------------------------------------------------------------------------

/** Last two digits of backlog recipient i: 2 % undelivered (01), 2 % no receipt (03), the rest delivered. */
export function endingOf(i: number): string {
  const m = i % 50;
  return m === 1 ? '01' : m === 3 ? '03' : `1${i % 10}`;
}

/** E.164 digits of backlog recipient i (CZ, 9 national digits starting with 7). */
export const backlogPhone = (i: number) => `4207${pad6(i)}${endingOf(i)}`;
/** Priority message j: a number range of its own (60…), always delivered. */
export const priorityPhone = (j: number) => `4206${pad6(j)}10`;
/** Warm-up recipient k of e2e-smpp: a range of its own (65…, 66…), the backlog's outcomes. */
export const warmupPhone = (k: number) => `4206${pad6(500_000 + k)}${endingOf(k)}`;

export function expectedResults(phone: string): string[] {
  switch (phone.slice(-2)) {
    case '01':
      return ['sending', 'sent', 'undelivered'];
    case '03':
      return ['sending', 'sent'];
    default:
      return ['sending', 'sent', 'delivered'];
  }
}

const RANK: Record<string, number> = { sending: 0, sent: 1, delivered: 2, seen: 3, undelivered: 2, rejected: 2, failed: 2 };

export interface EventCheck {
  recipients: number;
  expectedEvents: number;
  receivedEvents: number;
  ok: number;
  missingEvents: number;
  duplicateEvents: number;
  wrongResults: number;
  wrongFinal: number;
  unexpectedRecipients: number;
  /** Recipients whose events arrived in another order than they happened (allowed; informational). */
  outOfOrder: number;
  /** With `allowRepeats`: events delivered again (same recipient and result), allowed by D4's at-least-once. */
  repeatedEvents: number;
  finals: Record<string, number>;
  examples: string[];
  passed: boolean;
}

/**
 * Every recipient got exactly its expected events: count, results and the final result.
 * `subset`: the receiver also got events of other recipients (not counted as unexpected).
 */
export function checkEvents(
  receiver: Receiver, phones: Iterable<string>, subset = false, expectedOf: (phone: string) => string[] = expectedResults,
  /** A repeat of an event already received is counted in `repeatedEvents`, not as a duplicate (a process was killed: D4). */
  allowRepeats = false,
): EventCheck {
  const c: EventCheck = {
    recipients: 0, expectedEvents: 0, receivedEvents: receiver.events, ok: 0, missingEvents: 0, duplicateEvents: 0,
    wrongResults: 0, wrongFinal: 0, unexpectedRecipients: 0, outOfOrder: 0, repeatedEvents: 0, finals: {}, examples: [], passed: false,
  };
  const seen = new Set<string>();
  for (const phone of phones) {
    seen.add(phone);
    c.recipients++;
    const want = expectedOf(phone);
    c.expectedEvents += want.length;
    const received = receiver.results.get(phone) ?? [];
    const got = allowRepeats ? [...new Set(received)] : received;
    c.repeatedEvents += received.length - got.length;
    const final = got.reduce<string | null>((best, s) => (best === null || (RANK[s] ?? 0) > (RANK[best] ?? 0) ? s : best), null);
    c.finals[final ?? 'none'] = (c.finals[final ?? 'none'] ?? 0) + 1;
    const sortedGot = [...got].sort().join(',');
    const sortedWant = [...want].sort().join(',');
    let fine = true;
    if (got.length < want.length) {
      c.missingEvents += want.length - got.length;
      fine = false;
    } else if (got.length > want.length) {
      c.duplicateEvents += got.length - want.length;
      fine = false;
    }
    if (got.length === want.length && sortedGot !== sortedWant) {
      c.wrongResults++;
      fine = false;
    }
    if (final !== (want[want.length - 1] ?? null)) {
      c.wrongFinal++;
      fine = false;
    }
    if (fine) {
      c.ok++;
      if (got.join(',') !== want.join(',')) {
        c.outOfOrder++;
      }
    } else if (c.examples.length < 5) {
      c.examples.push(`${phone}: expected [${want.join(',')}], got [${received.join(',')}]`);
    }
  }
  if (!subset) {
    for (const key of receiver.results.keys()) {
      if (!seen.has(key)) {
        c.unexpectedRecipients++;
      }
    }
  }
  c.passed = c.ok === c.recipients && c.unexpectedRecipients === 0 && receiver.unkeyed === 0;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Common pieces
// ---------------------------------------------------------------------------------------------

export function serviceRole(ctx: Ctx): Options['processes'] {
  return ctx.opts.processes;
}

/** What every scenario reports about the service itself: database activity, error lines, profile. */
export function serviceFindings(
  done: { errorLines: number; profile: ProfileSummary[] | null; firstErrors: string[] }, pgActivity: PgActivity | null | undefined,
): Record<string, unknown> {
  return {
    ...(pgActivity && { pgActivity }),
    serviceErrorLogLines: done.errorLines,
    ...(done.firstErrors.length && { serviceErrors: done.firstErrors }),
    ...(done.profile && { profile: compactProfile(done.profile) }),
  };
}

export async function finish(ctx: Ctx, service: Service, label: string, window?: { fromUs: number; toUs: number }): Promise<{ errorLines: number; profile: ProfileSummary[] | null; firstErrors: string[] }> {
  const stopped = await service.stop();
  let profile: ProfileSummary[] | null = null;
  if (ctx.opts.cpuProf) {
    // Only the measured interval (not start-up, warm-up or shutdown).
    profile = stopped.profiles.map((file) => summariseProfile(file, 25, window));
    for (const p of profile) {
      ctx.log(`profile of ${label}:\n${formatProfile(p)}`);
    }
  }
  return { errorLines: stopped.errorLines.length, profile, firstErrors: stopped.errorLines.slice(0, 3) };
}

/** Starts a pg_stat_activity sampler when --pg-activity (or --cpu-prof) is on. */
export async function startPgSampler(ctx: Ctx, service: Service): Promise<{ stop(label: string): Promise<PgActivity | undefined> }> {
  if (!ctx.opts.pgActivity) {
    return { stop: async () => undefined };
  }
  const sampler = new PgActivitySampler(service.db.url, service.db.name);
  await sampler.start();
  return {
    stop: async (label: string) => {
      const activity = await sampler.stop();
      ctx.log(`postgres activity during ${label} (${activity.samples} samples, ${activity.meanActive} backends active, ` +
        `${activity.meanIdleInTransaction} idle in transaction on average):\n` +
        activity.top.map((t) => `  ${String(t.pct).padStart(5)} %  ${t.what}`).join('\n'));
      return activity;
    },
  };
}

function compactCharges(c: ChargeFigures): Record<string, unknown> {
  return {
    passed: c.passed, balanceCzk: c.balance, expectedBalanceCzk: c.expectedBalance, chargedCzk: c.kept, chargedAttempts: c.chargedAttempts,
    refundedAttempts: c.refundedAttempts, maxAttemptsPerRecipient: c.maxAttemptsPerRecipient,
  };
}

function compactProfile(profile: ProfileSummary[] | null): unknown {
  return profile?.map((p) => ({
    file: p.file, busyMs: p.busyMs, idleMs: p.idleMs, gcMs: p.gcMs,
    byArea: p.byArea.slice(0, 15), byStage: p.byStage.slice(0, 15), topSelf: p.topSelf.slice(0, 15), topInclusive: p.topInclusive.slice(0, 15),
  })) ?? undefined;
}

/** `n` message objects of 10 recipients each as one /v2/messages body. */
function messagesBody(phones: string[], callback: string | null, text: string): string {
  const objects: string[] = [];
  for (let o = 0; o < phones.length; o += 10) {
    const to = phones.slice(o, o + 10).map((p) => `{"phone_number":"+${p}"}`).join(',');
    objects.push(`{"body":${JSON.stringify(text)},"to":[${to}]${callback ? `,"callback":${JSON.stringify(callback)}` : ''}}`);
  }
  return `[${objects.join(',')}]`;
}

function acceptedCount(text: string): number {
  try {
    const body = JSON.parse(text) as { accepted?: unknown[] };
    return Array.isArray(body.accepted) ? body.accepted.length : 0;
  } catch {
    return 0;
  }
}

/**
 * Waits for `target` events until `deadline`, but gives up earlier when no event arrived for
 * `stallMs` (a lost event never comes; the result then says what is missing).
 */
export async function waitWithStall(
  receiver: Receiver, target: number, deadline: number, stallMs: number, abort: () => boolean = () => false,
  /** Count distinct events (repeated deliveries do not bring the target nearer). */
  distinct = false,
): Promise<boolean> {
  let lastCount = -1;
  let lastChange = Date.now();
  const count = () => (distinct ? receiver.distinct : receiver.events);
  while (Date.now() < deadline && !abort()) {
    const step = Math.min(deadline, Date.now() + 1000);
    if (await receiver.waitFor(target, step, distinct)) {
      return true;
    }
    if (count() !== lastCount) {
      lastCount = count();
      lastChange = Date.now();
    } else if (Date.now() - lastChange > stallMs) {
      return false;
    }
  }
  return count() >= target;
}

// ---------------------------------------------------------------------------------------------
// 1. accept
// ---------------------------------------------------------------------------------------------

export async function acceptScenario(ctx: Ctx): Promise<ScenarioResult> {
  const { opts } = ctx;
  const service = await startService(ctx, { label: 'accept', role: opts.acceptRole === 'web' ? 'web' : serviceRole(ctx), sandbox: false });
  const notes: string[] = [];
  let client: SpreadClient | null = null;
  try {
    const account = await createAccount(service);
    // Spread over the web copies (`--copies web=2`) as a round-robin balancer would.
    client = new SpreadClient(service.urls, opts.acceptConcurrency, { 'x-api-key': account.apiKey });
    // 64 distinct bodies of 10 objects x 10 recipients (no callback: nothing to deliver).
    const bodies = Array.from({ length: 64 }, (_, b) =>
      messagesBody(Array.from({ length: 100 }, (_, k) => backlogPhone(b * 100 + k)), null, 'Benchmark accept message'));
    const warmMs = opts.quick ? 500 : 2000;
    const c = client;
    await runBounded(opts.acceptConcurrency, Number.MAX_SAFE_INTEGER, Date.now() + warmMs, async (i) => {
      await c.request('POST', '/v2/messages', bodies[i % bodies.length]);
    });
    const { rows: before } = await service.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM recipients');
    const meter = new Meter(service.groups, new Set([service.db.name]), ctx.redis, service.rssPids, service.db.url);
    await meter.start();
    const pgSampler = await startPgSampler(ctx, service);
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    let recipients = 0;
    const started = performance.now();
    const maxRequests = Math.ceil(opts.acceptRecipients / 100);
    const requests = await runBounded(opts.acceptConcurrency, maxRequests, Date.now() + opts.acceptSeconds * 1000, async (i) => {
      const res = await c.request('POST', '/v2/messages', bodies[i % bodies.length]);
      latencies.push(res.ms);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 200) {
        recipients += acceptedCount(res.text) * 10;
      }
    });
    const elapsedMs = performance.now() - started;
    const cpu = await meter.stop();
    const pgActivity = await pgSampler.stop('accept');
    const { rows: after } = await service.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM recipients');
    const stored = Number(after[0]!.n) - Number(before[0]!.n);
    if (stored !== recipients) {
      notes.push(`recipients rows written (${stored}) differ from recipients accepted (${recipients})`);
    }
    const lat = percentiles(latencies);
    const done = await finish(ctx, service, 'accept', meter.window);
    const errors = requests - (statuses['200'] ?? 0);
    return {
      scenario: 'accept',
      ok: errors === 0 && stored === recipients,
      notes,
      role: opts.acceptRole,
      concurrency: opts.acceptConcurrency,
      requests,
      recipients,
      storedRecipients: stored,
      seconds: r1(elapsedMs / 1000),
      recipientsPerS: rate(recipients, elapsedMs),
      requestsPerS: rate(requests, elapsedMs),
      latencyMs: lat,
      statuses,
      cpu,
      cpuUsPerRecipient: costPer(cpu, recipients),
      writeSyscallsPerRecipient: writesPer(cpu, recipients),
      workPerRecipient: workPer(cpu, recipients),
      rss: meter.rssSummary(),
      ...serviceFindings(done, pgActivity),
    };
  } catch (err) {
    await service.stop().catch(() => undefined);
    throw err;
  } finally {
    await client?.close().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// 2 + 3. e2e-smpp and priority-under-load (one run: the priority messages travel during the backlog)
// ---------------------------------------------------------------------------------------------

interface PrioritySend {
  phone: string;
  sentAt: number;
  acceptMs: number;
  status: number;
}

/** Warm-up priority message j: a range of its own within the priority numbers (…300000…), delivered. */
const warmupPriorityPhone = (j: number) => priorityPhone(300_000 + j);

/**
 * Sends `opts.warmup` recipients through the whole path and waits for their events, then forgets them.
 * `priority`: single priority messages sent beside the bulk, when the measured run sends them too.
 * The priority lane has a process of its own (worker_priority), which otherwise met its first
 * traffic, and compiled its code, inside the measured interval: ~2 s of its CPU for 200 messages.
 */
async function warmUp(
  opts: Ctx['opts'], service: Service, receiver: Receiver, apiKey: string, clients: Array<{ close(): Promise<void> }>, priority: number,
): Promise<{ recipients: number; priorityMessages: number; seconds: number; complete: boolean }> {
  const phones = Array.from({ length: opts.warmup }, (_, k) => warmupPhone(k));
  const priorityPhones = Array.from({ length: priority }, (_, j) => warmupPriorityPhone(j));
  const expected = [...phones, ...priorityPhones].reduce((a, p) => a + expectedResults(p).length, 0);
  const client = new SpreadClient(service.urls, opts.concurrency, { 'x-api-key': apiKey });
  clients.push(client);
  const started = Date.now();
  const deadline = started + 60_000 + opts.warmup * 10;
  await Promise.all([
    runBounded(opts.concurrency, Math.ceil(phones.length / 100), deadline, async (i) => {
      await client.request('POST', '/v2/messages', messagesBody(phones.slice(i * 100, i * 100 + 100), receiver.url, 'Your weekly offer: 20 % off everything'));
    }),
    runBounded(4, priorityPhones.length, deadline, async (j) => {
      await client.request('POST', '/v2/message', JSON.stringify({
        body: `Your code is ${100000 + j}`, to: [{ phone_number: `+${priorityPhones[j]}` }], tag: 'priority', callback: receiver.url,
      }));
    }),
  ]);
  const complete = await waitWithStall(receiver, expected, deadline, opts.quick ? 8000 : 30_000, undefined, true);
  // Late duplicates of the warm-up would count as unexpected recipients in the check.
  await sleep(opts.quick ? 200 : 500);
  receiver.reset();
  return { recipients: phones.length, priorityMessages: priority, seconds: r1((Date.now() - started) / 1000), complete };
}

/** One run of the e2e-smpp path: the default (e2e-smpp), its capped variant, and the --copies / --kill-one runs. */
export interface E2eRun {
  scenario: 'e2e-smpp' | 'e2e-smpp-capped';
  /** Names the database and Redis prefix (distinct per run within one harness run). */
  label: string;
  /** SMPP_URL's query. */
  smppParams: string;
  recipients: number;
  copies: CopiesSpec;
  /** SIGKILL the first copy of each worker role once a third of the expected events arrived, then restart it. */
  killOne: boolean;
  /** What this run is, for the report (`one copy of each role (baseline)`, …); null for a plain run. */
  variant: string | null;
}

/** The plain e2e-smpp run of the options. */
export function defaultE2eRun(opts: Ctx['opts']): E2eRun {
  return { scenario: 'e2e-smpp', label: 'e2e', smppParams: opts.smppParams, recipients: opts.recipients, copies: opts.copies, killOne: false, variant: null };
}

/** Whether a worker process (by its arguments) runs `pool`'s jobs (SMS: it binds SMPP): every pool without `--pools=`. */
export function runsPool(args: string[], pool: string): boolean {
  return listedOrAll(args, '--pools=', pool);
}

/** Whether a worker process runs jobs of `lane`: every lane without `--lanes=`. */
export function runsLane(args: string[], lane: string): boolean {
  return listedOrAll(args, '--lanes=', lane);
}

function listedOrAll(args: string[], flag: string, name: string): boolean {
  const list = args.find((a) => a.startsWith(flag));
  return list === undefined || list.slice(flag.length).split(',').includes(name);
}

/**
 * How long a kill run waits without a new event before it gives up: a killed process's jobs come
 * back when their lock runs out (DISPATCH_LOCK_MS to twice that; BullMQ's 30 s lock checked every
 * 30 s for status and webhook jobs), and work it had not queued yet is found by the recovery sweep
 * (RECOVERY_SWEEP_MS, 30 s, plus a grace of 30 s): up to ~90 s at the defaults.
 */
export const KILL_STALL_MS = 120_000;

/** A service process exited without the harness asking it to, or the simulator did. */
export function somethingDied(service: Service, simulator: Child | null): boolean {
  return service.unexpectedExits().length > 0 || (simulator !== null && !simulator.alive());
}

/** Notes for the processes that exited during the run (their figures are not valid). */
export async function noteExits(service: Service, simulator: Child | null, notes: string[]): Promise<void> {
  for (const id of service.unexpectedExits()) {
    const c = service.processes.find((p) => p.id === id)!.child;
    notes.push(`${c.name} exited (${await c.exited}) during the run; the figures are not valid (see its log)`);
  }
  if (simulator && !simulator.alive()) {
    notes.push(`the simulator exited (${await simulator.exited}) during the run; the figures are not valid (see its log)`);
  }
}

/** How a kill run describes itself (`variant`). */
export const killVariant = (pauseMs: number): string => `the first copy of each worker role SIGKILLed mid-run, restarted after ${pauseMs / 1000} s`;

/** --kill-one in a scenario: the kill (see `killFirstCopiesAt`) when asked for, else nothing. */
export function maybeKill(
  killOne: boolean, service: Service, receiver: Receiver, expectedEvents: number, deadline: number, pauseMs: number, t0: number, notes: string[],
): { killed: KilledProcess[]; done: Promise<void> } {
  return killOne
    ? killFirstCopiesAt(service, receiver, Math.ceil(expectedEvents / 3), deadline, pauseMs, t0, notes)
    : { killed: [], done: Promise.resolve() };
}

export interface KilledProcess {
  id: string;
  /** Seconds from the run's start to the kill. */
  atS: number;
  /** Seconds until it was up again; null when it did not start again. */
  upAgainAfterS: number | null;
}

/**
 * --kill-one: once `threshold` distinct events arrived (accepting, dispatch, sends, reports and
 * webhooks all under way), SIGKILLs the first copy of every worker role at once and starts each
 * again after `pauseMs`, as a supervisor (systemd, Docker) restarts it. `done` resolves when every
 * kill and restart is over (at once when the threshold is not reached by `deadline`).
 */
export function killFirstCopiesAt(
  service: Service, receiver: Receiver, threshold: number, deadline: number, pauseMs: number, t0: number, notes: string[],
): { killed: KilledProcess[]; done: Promise<void> } {
  const killed: KilledProcess[] = [];
  const done = (async () => {
    if (!(await receiver.waitFor(threshold, deadline, true))) {
      return;
    }
    const firsts = service.processes.filter((p) => p.role !== 'web' && p.role !== 'service' && p.id === p.role);
    await Promise.all(firsts.map(async (p) => {
      try {
        await service.killAndRestart(p.id, pauseMs);
      } catch (err) {
        notes.push(`${p.id} did not start again after its kill: ${(err as Error).message.split('\n')[0]}`);
      }
      const k = p.kills[p.kills.length - 1];
      killed.push({ id: p.id, atS: k ? r1((k.at - t0) / 1000) : 0, upAgainAfterS: k?.restartedAt ? r1((k.restartedAt - k.at) / 1000) : null });
    }));
  })();
  return { killed, done };
}

/** The SMPP window of an SMPP_URL query (parseSmppUrl's default 10 when absent). */
function windowOf(params: string): number {
  const w = Number(new URLSearchParams(params).get('window') ?? 10);
  return Number.isInteger(w) && w > 0 ? w : 10;
}

export interface SubmitCheck {
  passed: boolean;
  /** Recipients the simulator saw (distinct numbers) against the recipients sent. */
  destinations: number;
  recipients: number;
  repeated: number;
  extraSubmits: number;
  /** Repeats given a second SMSC id: the handset got that SMS twice. */
  givenTwoIds: number;
  /** Repeats allowed: 0, or with --kill-one what a crash may repeat (SMS default lanes: at least once,
   * at most `window` PDUs per killed process that sends SMS; docs/reliability.md). */
  allowed: number;
  detail: string;
  examples: string[];
}

/** No recipient submitted twice (each has a number of its own), none left unsubmitted. */
function submitRepeatsCheck(r: SimRepeats, recipients: number, run: E2eRun, service: Service): SubmitCheck {
  const killedSms = run.killOne ? service.processes.filter((p) => p.kills.length > 0 && runsPool(p.args, 'sms')).length : 0;
  const allowed = killedSms * windowOf(run.smppParams);
  const passed = r.destinations === recipients && r.repeated <= allowed;
  const detail = `${r.destinations}/${recipients} recipients submitted; ${r.repeated} submitted more than once ` +
    `(${r.extraSubmits} extra submit_sm, ${r.givenTwoIds} given two SMSC ids)` +
    `${run.killOne ? `; allowed after the kill: ${allowed} (window ${windowOf(run.smppParams)} × ${killedSms} killed SMS processes)` : ''}`;
  return { passed, destinations: r.destinations, recipients, repeated: r.repeated, extraSubmits: r.extraSubmits, givenTwoIds: r.givenTwoIds, allowed, detail, examples: r.examples };
}

/** e2e-smpp-capped: the submit rate the simulator measured against the cap. */
export interface CapReport {
  tps: number;
  /** Submits from the first to the last one at the simulator, per second. */
  submitsPerS: number;
  /** submitsPerS / tps. */
  ofCap: number;
  /** The busiest whole second (seconds counted from the first submit; the last, partial one left out). */
  peakSecond: number;
  /** Whole seconds in which more than `tps` submit_sm arrived. */
  secondsAboveCap: number;
  seconds: number;
}

export function capReport(tps: number, submits: number, firstAt: number, lastAt: number, perSecond: number[]): CapReport {
  const whole = perSecond.slice(0, Math.max(0, perSecond.length - 1));
  const spanMs = lastAt - firstAt;
  const submitsPerS = spanMs > 0 ? Math.round(((submits - 1) * 1000) / spanMs) : 0;
  return {
    tps,
    submitsPerS,
    ofCap: Math.round((submitsPerS / tps) * 1000) / 1000,
    peakSecond: Math.max(0, ...whole),
    secondsAboveCap: whole.filter((x) => x > tps).length,
    seconds: r1(spanMs / 1000),
  };
}

export async function e2eScenario(ctx: Ctx, withBacklogResult: boolean, withPriority: boolean, run: E2eRun = defaultE2eRun(ctx.opts)): Promise<ScenarioResult[]> {
  const { opts } = ctx;
  const carrier = resolveCarrier(opts, ctx.root);
  const notes: string[] = [];
  let sim: Simulator | null = null;
  if (carrier === 'smpp') {
    // After a kill, a receipt written to the dead session is sent again on another one, as SMSCs do.
    sim = await startSimulator(ctx, run.killOne ? 1000 : 0);
  }
  const smppUrl = sim ? `smpp://bench:bench@127.0.0.1:${sim.port}${run.smppParams ? `?${run.smppParams}` : ''}` : null;
  let service: Service;
  try {
    service = await startService(ctx, { label: run.label, role: serviceRole(ctx), sandbox: carrier === 'sandbox', smppUrl, copies: run.copies });
  } catch (err) {
    await sim?.stop();
    throw err;
  }
  const receiver = new Receiver('e2e', byPhone);
  const clients: Array<{ close(): Promise<void> }> = [];
  try {
    await receiver.start();
    const account = await createAccount(service);
    if (sim) {
      const bindDeadline = Date.now() + 10_000;
      while ((await sim.stats()).boundSessions === 0 && Date.now() < bindDeadline) {
        await sleep(100);
      }
      if ((await sim.stats()).boundSessions === 0) {
        notes.push('the service did not bind to the SMSC simulator within 10 s (is SMPP_URL wired in shared/runtime.ts?)');
      }
    }
    // Warm-up: the same path for recipients of their own, waited for and then forgotten, so that
    // the measured run, and the first quarter its RSS is compared with, starts from processes
    // that have carried traffic (a service runs for days; its first seconds are not its size).
    // RSS before the warm-up is reported as well.
    const rssFresh: Record<string, number> = {};
    if (opts.warmup > 0) {
      for (const [name, pid] of Object.entries(service.rssPids)) {
        const bytes = processRssBytes(pid);
        if (bytes !== null) rssFresh[name] = r1(bytes / 1048576);
      }
    }
    const warmupPriority = withPriority ? Math.min(opts.priority, 200) : 0;
    const warmup = opts.warmup > 0 ? await warmUp(opts, service, receiver, account.apiKey, clients, warmupPriority) : null;
    if (warmup && !warmup.complete) {
      notes.push(`the warm-up's ${warmup.recipients} recipients did not all get their events within ${warmup.seconds} s`);
    }
    if (warmup) await sim?.reset();
    const measuredFrom = (await service.db.pool.query<{ at: Date }>('SELECT clock_timestamp() AS at')).rows[0]!.at;

    const n = run.recipients;
    const phones = Array.from({ length: n }, (_, i) => backlogPhone(i));
    const bodies: string[] = [];
    for (let i = 0; i < n; i += 100) {
      bodies.push(messagesBody(phones.slice(i, i + 100), receiver.url, 'Your weekly offer: 20 % off everything'));
    }
    const priorityCount = withPriority ? opts.priority : 0;
    const priorityPhones = Array.from({ length: priorityCount }, (_, j) => priorityPhone(j));
    const allPhones = [...phones, ...priorityPhones];
    const expectedEvents = allPhones.reduce((a, p) => a + expectedResults(p).length, 0);

    const backlog = new SpreadClient(service.urls, opts.concurrency, { 'x-api-key': account.apiKey });
    clients.push(backlog);
    const groups: Record<string, number[]> = { ...service.groups, ...(sim && { simulator: [sim.child.pid] }) };
    const rssPids: Record<string, number> = { ...service.rssPids, ...(sim && { simulator: sim.child.pid }) };
    const meter = new Meter(groups, new Set([service.db.name]), ctx.redis, rssPids, service.db.url);
    await meter.start();
    const pgSampler = await startPgSampler(ctx, service);
    const t0 = Date.now();
    // 100,000 recipients: at most ~17.5 min, so that a full run stays within 30 minutes even when slow.
    const timeoutMs = (opts.quick ? 20_000 : 60_000) + n * 10 + priorityCount * opts.priorityIntervalMs + (run.killOne ? KILL_STALL_MS : 0);
    const deadline = t0 + timeoutMs;

    // Backlog: every request of 100 recipients, `concurrency` in flight.
    const acceptLatencies: number[] = [];
    const statuses: Record<string, number> = {};
    let accepted = 0;
    let requestsDone = 0;
    let lastAcceptAt = 0;
    const backlogDone = runBounded(opts.concurrency, bodies.length, deadline, async (i) => {
      const res = await backlog.request('POST', '/v2/messages', bodies[i]);
      acceptLatencies.push(res.ms);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status === 200) {
        accepted += acceptedCount(res.text) * 10;
      }
      requestsDone++;
      lastAcceptAt = Date.now();
    });

    // Priority: once a tenth of the backlog is in, one single message every interval, sent by a
    // child process (scripts/bench/priority-child.ts) so that the harness's own load cannot delay it.
    const prioritySends: PrioritySend[] = [];
    const priorityDone = (async () => {
      if (priorityCount === 0) {
        return;
      }
      while (requestsDone < Math.max(1, Math.floor(bodies.length / 10)) && Date.now() < deadline) {
        await sleep(10);
      }
      const { child, ready } = await spawnChild<{ sends: PrioritySend[] }>({
        name: 'priority sender',
        args: [path.join(ctx.root, 'dist/scripts/bench/priority-child.js')],
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          BENCH_PRIORITY: JSON.stringify({ url: service.url, apiKey: account.apiKey, intervalMs: opts.priorityIntervalMs, callback: receiver.url, phones: priorityPhones }),
        },
        cwd: ctx.root,
        logFile: path.join(ctx.runDir, 'priority.log'),
        ready: (line) => (line.startsWith('{"event":"done"') ? JSON.parse(line) as { sends: PrioritySend[] } : null),
        readyTimeoutMs: Math.max(60_000, deadline - Date.now()),
      });
      prioritySends.push(...ready.sends);
      await child.exited;
    })();

    // Responsiveness probe: GET /health (one Postgres and one Redis round trip through the
    // service's own pools) every 200 ms; its latency shows event-loop and pool queueing.
    const healthMs: number[] = [];
    let healthFailures = 0;
    let probing = true;
    const probe = (async () => {
      while (probing) {
        const res = await service.admin.request('GET', '/health').catch(() => null);
        if (res && res.status === 200) {
          healthMs.push(res.ms);
        } else {
          healthFailures++;
        }
        await sleep(200);
      }
    })();

    // Progress on stderr every 5 s.
    const progress = setInterval(() => {
      void (async () => {
        const s = sim ? await sim.stats().catch(() => null) : null;
        ctx.log(`e2e +${Math.round((Date.now() - t0) / 1000)} s: accepted ${accepted}/${n}` +
          `${s ? `, submit_sm ${s.counters.submits}, receipts ${s.counters.receiptsSent}` : ''}, webhook events ${receiver.events}/${expectedEvents}`);
      })();
    }, 5000);
    // --kill-one: the first copy of every worker role SIGKILLed once a third of the events arrived.
    const { killed, done: killDone } = maybeKill(run.killOne, service, receiver, expectedEvents, deadline, opts.restartPauseMs, t0, notes);
    let complete: boolean;
    try {
      await backlogDone;
      await priorityDone;
      const stallMs = run.killOne ? KILL_STALL_MS : opts.quick ? 8000 : 30_000;
      complete = await waitWithStall(receiver, expectedEvents, deadline, stallMs, () => somethingDied(service, sim?.child ?? null), true);
      await killDone;
      await noteExits(service, sim?.child ?? null, notes);
    } finally {
      clearInterval(progress);
      probing = false;
      await probe;
    }
    const lastEventAt = receiver.lastAt;
    const cpu = await meter.stop();
    const pgActivity = await pgSampler.stop('e2e');
    const rss = meter.rssSummary();
    if (!complete) {
      notes.push(`stopped waiting after ${Math.round((Date.now() - t0) / 1000)} s with ${receiver.distinct} of ${expectedEvents} events ` +
        `(${receiver.events} received with repeats)`);
    }
    // Late duplicates would arrive now.
    await sleep(opts.quick ? 500 : 1500);
    const check = checkEvents(receiver, allPhones, false, expectedResults, run.killOne);
    if (check.repeatedEvents > 0) {
      notes.push(`${check.repeatedEvents} webhook events delivered again after the kill (at least once, D4; not counted as wrong)`);
    }

    const db = service.db.pool;
    // Rows of the measured run only (the warm-up's were all written before `measuredFrom`).
    const { rows: states } = await db.query<{ state: string; n: string }>(
      'SELECT state, count(*) AS n FROM attempts WHERE created_at >= $1 GROUP BY state ORDER BY state', [measuredFrom]);
    const { rows: [handed] } = await db.query<{ n: string; last: string | null }>(
      `SELECT count(*) AS n, (extract(epoch FROM max(handed_at)) * 1000)::bigint AS last FROM attempts
        WHERE handed_at IS NOT NULL AND created_at >= $1`, [measuredFrom]);
    const { rows: [finals] } = await db.query<{ n: string; first: string | null; last: string | null }>(
      `SELECT count(*) AS n, (extract(epoch FROM min(updated_at)) * 1000)::bigint AS first, (extract(epoch FROM max(updated_at)) * 1000)::bigint AS last
         FROM attempts WHERE state IN ('delivered', 'undelivered') AND created_at >= $1`, [measuredFrom]);
    const { rows: [batches] } = await db.query<{ n: string; events: string | null }>(
      'SELECT count(*) AS n, avg(cardinality(event_ids)) AS events FROM webhook_batches WHERE created_at >= $1', [measuredFrom]);
    const simStats = sim ? await sim.stats() : null;
    const submitCheck = sim ? submitRepeatsCheck(await sim.repeats(), allPhones.length, run, service) : null;
    if (submitCheck && !submitCheck.passed) {
      notes.push(submitCheck.detail);
    }
    const charges = await chargeFigures(db, account.accountId, BENCH_CREDIT_CZK);
    if (!charges.passed) {
      notes.push(`charges: balance ${charges.balance} ≠ ${charges.expectedBalance} (credit − Σ charged), or ` +
        `${charges.recipientsWithSeveralAttempts} recipients with more than one attempt`);
    }
    // Submits: simulator counters (SMPP; zeroed after the warm-up), else hand-overs to the sandbox.
    const submits = simStats ? simStats.counters.submitsAccepted : Number(handed!.n);
    const lastSubmitAt = simStats ? simStats.lastSubmitAt : Number(handed!.last ?? 0);
    if (sim && submits === 0) {
      notes.push('no submit_sm reached the simulator');
    }
    const receiptsApplied = Number(finals!.n);
    const lastReceiptAppliedAt = Number(finals!.last ?? 0);
    const total = n + priorityCount;

    // Priority latency: accept request start -> submit_sm at the simulator (or hand-over to the sandbox).
    let priorityResult: ScenarioResult | null = null;
    if (withPriority) {
      const sendOf = new Map(prioritySends.map((s) => [s.phone, s]));
      const submitAt = new Map<string, number>();
      if (sim) {
        const times = await sim.lookup(priorityPhones.flatMap((p) => [p, `+${p}`]));
        for (const p of priorityPhones) {
          const t = times[p] ?? times[`+${p}`];
          if (typeof t === 'number') {
            submitAt.set(p, t);
          }
        }
      } else {
        const { rows } = await db.query<{ phone_number: string; at: string }>(
          `SELECT phone_number, (extract(epoch FROM min(created_at)) * 1000)::bigint AS at FROM sandbox_messages
            WHERE phone_number = ANY($1) GROUP BY phone_number`, [priorityPhones]);
        for (const row of rows) {
          submitAt.set(row.phone_number, Number(row.at));
        }
      }
      const latencies: number[] = [];
      const acceptMs: number[] = [];
      for (const p of priorityPhones) {
        const s = sendOf.get(p);
        const t = submitAt.get(p);
        if (s && s.status === 200) {
          acceptMs.push(s.acceptMs);
        }
        if (s && t !== undefined) {
          latencies.push(Math.max(0, t - s.sentAt));
        }
      }
      const prioChecks = checkEvents(receiver, priorityPhones, true, expectedResults, run.killOne);
      // Where the time goes: accept commit -> dispatch transaction start (queue + worker pickup),
      // dispatch start -> submit_sm (transaction, credit, carrier queue and window).
      const { rows: stamps } = await db.query<{ phone: string; accepted: string; dispatched: string | null }>(
        `SELECT r.phone, (extract(epoch FROM r.created_at) * 1000)::bigint AS accepted,
                (extract(epoch FROM min(a.created_at)) * 1000)::bigint AS dispatched
           FROM recipients r LEFT JOIN attempts a ON a.recipient_id = r.id
          WHERE r.phone = ANY($1) GROUP BY r.phone, r.created_at`, [priorityPhones]);
      const toDispatch: number[] = [];
      const dispatchToSubmit: number[] = [];
      for (const row of stamps) {
        if (row.dispatched === null) {
          continue;
        }
        toDispatch.push(Math.max(0, Number(row.dispatched) - Number(row.accepted)));
        const t = submitAt.get(row.phone);
        if (t !== undefined) {
          dispatchToSubmit.push(Math.max(0, t - Number(row.dispatched)));
        }
      }
      const backlogAcceptEnd = lastAcceptAt;
      const sentDuring = prioritySends.filter((s) => s.sentAt <= backlogAcceptEnd).length;
      const inBacklog = prioritySends.filter((s) => s.sentAt <= lastSubmitAt).length;
      const lat = percentiles(latencies);
      priorityResult = {
        scenario: 'priority-under-load',
        ok: latencies.length === priorityCount && prioChecks.passed,
        copies: service.copies,
        variant: run.variant,
        notes: latencies.length === priorityCount ? [] : [`${priorityCount - latencies.length} priority messages were not matched to a submit`],
        carrier,
        measuredAt: sim ? 'submit_sm received by the SMSC simulator' : 'hand-over to the sandbox carrier (sandbox_messages.created_at)',
        messages: priorityCount,
        intervalMs: opts.priorityIntervalMs,
        sentWhileBacklogWasAccepted: sentDuring,
        sentBeforeTheLastSubmit: inBacklog,
        matched: latencies.length,
        acceptToSubmitMs: lat,
        acceptLatencyMs: percentiles(acceptMs),
        breakdownMs: {
          acceptCommitToDispatchStart: percentiles(toDispatch),
          dispatchStartToSubmit: percentiles(dispatchToSubmit),
        },
        eventsCheck: { passed: prioChecks.passed, ok: prioChecks.ok, missingEvents: prioChecks.missingEvents, duplicateEvents: prioChecks.duplicateEvents },
      };
    }

    const done = await finish(ctx, service, 'e2e', meter.window);
    const results: ScenarioResult[] = [];
    if (withBacklogResult) {
      const ms = (t: number) => (t > 0 ? t - t0 : 0);
      const capTps = run.scenario === 'e2e-smpp-capped' ? tpsOf(run.smppParams) : null;
      const cap = capTps !== null && simStats
        ? capReport(capTps, submits, simStats.firstSubmitAt, simStats.lastSubmitAt, simStats.submitsPerSecond) : null;
      if (cap && cap.secondsAboveCap > 0) {
        notes.push(`the cap was exceeded in ${cap.secondsAboveCap} whole second(s) at the simulator (busiest: ${cap.peakSecond} submit_sm, cap ${cap.tps})`);
      }
      results.push({
        scenario: run.scenario,
        ok: check.passed && complete && (!sim || submits > 0) && (statuses['200'] ?? 0) === bodies.length &&
          (submitCheck?.passed ?? true) && charges.passed && killed.every((k) => k.upAgainAfterS !== null),
        notes,
        carrier,
        smppUrl: smppUrl?.replace(/\/\/[^@]*@/, '//…@') ?? null,
        // The configuration the figures are for (issue 23): SMPP_URL's query and the simulator's ids.
        smppParams: sim ? run.smppParams : null,
        smscIds: sim ? opts.smscIds : null,
        ...(cap && { cap }),
        processes: opts.processes,
        copies: service.copies,
        variant: run.variant,
        ...(run.killOne && { killed }),
        recipients: n,
        warmup,
        priorityMessages: priorityCount,
        concurrency: opts.concurrency,
        accepted,
        acceptedPerS: rate(accepted, ms(lastAcceptAt)),
        acceptLatencyMs: percentiles(acceptLatencies),
        acceptStatuses: statuses,
        healthLatencyMs: percentiles(healthMs),
        healthFailures,
        submits,
        submitsPerS: rate(submits, ms(lastSubmitAt)),
        peakSubmitsPerS: simStats ? Math.max(0, ...simStats.submitsPerSecond) : null,
        receiptsSent: simStats?.counters.receiptsSent ?? null,
        receiptsApplied,
        receiptsAppliedPerS: rate(receiptsApplied, ms(lastReceiptAppliedAt)),
        webhookEvents: receiver.events,
        webhookEventsPerS: rate(receiver.events, ms(lastEventAt)),
        webhookPosts: receiver.posts,
        webhookBatches: Number(batches!.n),
        eventsPerBatch: r1(Number(batches!.events ?? 0)),
        recipientsPerSEndToEnd: rate(total, ms(lastEventAt)),
        secondsUntil: {
          lastAccept: r1(ms(lastAcceptAt) / 1000),
          lastSubmit: r1(ms(lastSubmitAt) / 1000),
          lastReceiptApplied: r1(ms(lastReceiptAppliedAt) / 1000),
          lastEvent: r1(ms(lastEventAt) / 1000),
        },
        attempts: Object.fromEntries(states.map((s) => [s.state, Number(s.n)])),
        check,
        submitCheck,
        charges: compactCharges(charges),
        cpu,
        cpuUsPerRecipient: costPer(cpu, total),
        writeSyscallsPerRecipient: writesPer(cpu, total),
        workPerRecipient: workPer(cpu, total),
        rss,
        rssBeforeWarmupMiB: warmup ? rssFresh : null,
        ...serviceFindings(done, pgActivity),
      });
    }
    if (priorityResult) {
      results.push(priorityResult);
    }
    return results;
  } catch (err) {
    await service.stop().catch(() => undefined);
    throw err;
  } finally {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await receiver.close();
    await sim?.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// 4. webhooks
// ---------------------------------------------------------------------------------------------

/** Writes `count` sentMessage events to the outbox in one statement (one commit), spread over `urls`. */
async function seedEvents(service: Service, accountId: number, keyId: number, urls: string[], count: number, tag: string): Promise<void> {
  await service.db.pool.query(
    `WITH e AS (
     INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body)
     SELECT $1, $2, ($3::text[])[1 + (g % cardinality($3::text[]))], NULL, 'sentMessage',
            json_build_object('request_id', '00000000-0000-4000-8000-000000000000', 'message_id', $4 || g, 'gateway', 'sms',
              'timestamp', extract(epoch FROM now())::bigint, 'payload', NULL, 'type', 'outgoing',
              'to', json_build_object('phone_number', '420777' || lpad(g::text, 6, '0')), 'result', 'delivered',
              'result_info', '[0] Delivered',
              'sms', json_build_object('sender', 'Bench', 'country', 230, 'operator', 1, 'price_czk', 0.9, 'price_eur', 0.036,
                                       'count', 1, 'gateway', 'high'))::text
       FROM generate_series(1, $5::int) AS g
     RETURNING id)
     INSERT INTO outbox (event_ids) SELECT array_agg(id ORDER BY id) FROM e`,
    [accountId, keyId, urls, `${tag}-`, count],
  );
}

function idCheck(receivers: Receiver[], perReceiver: number[]): { missing: number; duplicates: number } {
  let missing = 0;
  let duplicates = 0;
  receivers.forEach((r, i) => {
    let got = 0;
    for (const list of r.results.values()) {
      got++;
      duplicates += list.length - 1;
    }
    missing += Math.max(0, perReceiver[i]! - got);
  });
  return { missing, duplicates };
}

export async function webhooksScenario(ctx: Ctx): Promise<ScenarioResult[]> {
  const { opts } = ctx;
  const service = await startService(ctx, { label: 'webhooks', role: serviceRole(ctx), sandbox: false });
  const receivers: Receiver[] = [];
  try {
    const account = await createAccount(service);
    const n = opts.webhookEvents;
    const out: ScenarioResult[] = [];
    const window = { fromUs: 0, toUs: 0 };

    // Phase 1: one receiver.
    const one = new Receiver('one', byMessageId);
    receivers.push(one);
    await one.start();
    {
      const meter = new Meter(service.groups, new Set([service.db.name]), ctx.redis, service.rssPids, service.db.url);
      await meter.start();
      await seedEvents(service, account.accountId, account.keyId, [one.url], n, 'a');
      const t0 = Date.now();
      const deadline = t0 + 60_000 + n * 2;
      const complete = await one.waitFor(n, deadline);
      const cpu = await meter.stop();
      window.fromUs = meter.window.fromUs;
      await sleep(opts.quick ? 100 : 1000);
      const ids = idCheck([one], [n]);
      out.push({
        scenario: 'webhooks',
        phase: '1 receiver',
        ok: complete && ids.missing === 0 && ids.duplicates === 0,
        notes: complete ? [] : [`timed out with ${one.events} of ${n} events`],
        events: n,
        delivered: one.events,
        posts: one.posts,
        eventsPerPost: r1(one.events / Math.max(1, one.posts)),
        seconds: r1((one.lastAt - t0) / 1000),
        eventsPerS: rate(one.events, one.lastAt - t0),
        ...ids,
        cpu,
        cpuUsPerEvent: costPer(cpu, n),
        writeSyscallsPerEvent: writesPer(cpu, n),
        workPerEvent: workPer(cpu, n),
      });
    }

    // Phase 2: `receivers` receivers, the first one slow.
    const many: Receiver[] = [];
    for (let i = 0; i < opts.receivers; i++) {
      const r = new Receiver(`r${i}`, byMessageId, i === 0 ? opts.slowMs : 0);
      await r.start();
      many.push(r);
      receivers.push(r);
    }
    {
      const urls = many.map((r) => r.url);
      // seedEvents gives event g (1…n) to urls[g % receivers].
      const per = urls.map(() => 0);
      for (let g = 1; g <= n; g++) {
        per[g % urls.length]!++;
      }
      const meter = new Meter(service.groups, new Set([service.db.name]), ctx.redis, service.rssPids, service.db.url);
      await meter.start();
      await seedEvents(service, account.accountId, account.keyId, urls, n, 'b');
      const t0 = Date.now();
      const deadline = t0 + 60_000 + n * 2;
      const complete = await waitForAll(many.map((r, i) => ({ receiver: r, events: per[i]! })), deadline);
      const cpu = await meter.stop();
      window.toUs = meter.window.toUs;
      await sleep(opts.quick ? 100 : 1000);
      const ids = idCheck(many, per);
      const delivered = many.reduce((a, r) => a + r.events, 0);
      const fastLast = Math.max(...many.slice(1).map((r) => r.lastAt));
      const slow = many[0]!;
      out.push({
        scenario: 'webhooks',
        phase: `${opts.receivers} receivers, 1 slow (${opts.slowMs} ms)`,
        ok: complete && ids.missing === 0 && ids.duplicates === 0,
        notes: complete ? [] : [`timed out with ${delivered} of ${n} events`],
        events: n,
        delivered,
        posts: many.reduce((a, r) => a + r.posts, 0),
        eventsPerPost: r1(delivered / Math.max(1, many.reduce((a, r) => a + r.posts, 0))),
        seconds: r1((Math.max(fastLast, slow.lastAt) - t0) / 1000),
        eventsPerS: rate(delivered, Math.max(fastLast, slow.lastAt) - t0),
        fastReceivers: { events: delivered - slow.events, seconds: r1((fastLast - t0) / 1000), eventsPerS: rate(delivered - slow.events, fastLast - t0) },
        slowReceiver: { events: slow.events, posts: slow.posts, seconds: r1((slow.lastAt - t0) / 1000) },
        ...ids,
        cpu,
        cpuUsPerEvent: costPer(cpu, n),
        writeSyscallsPerEvent: writesPer(cpu, n),
        workPerEvent: workPer(cpu, n),
      });
    }
    const done = await finish(ctx, service, 'webhooks', window);
    for (const r of out) {
      r.serviceErrorLogLines = done.errorLines;
    }
    if (done.profile) {
      out[out.length - 1]!.profile = compactProfile(done.profile);
    }
    return out;
  } catch (err) {
    await service.stop().catch(() => undefined);
    throw err;
  } finally {
    await Promise.all(receivers.map((r) => r.close()));
  }
}

// ---------------------------------------------------------------------------------------------
// 5. verify
// ---------------------------------------------------------------------------------------------

export async function verifyScenario(ctx: Ctx): Promise<ScenarioResult> {
  const { opts } = ctx;
  const service = await startService(ctx, { label: 'verify', role: serviceRole(ctx), sandbox: true });
  let client: Client | null = null;
  try {
    const account = await createAccount(service);
    const limits = await service.admin.json('PATCH', `/admin/api/accounts/${account.accountId}`, {
      verify_account_per_min: 1_000_000, verify_phone_per_hour: 10_000, verify_phone_cooldown_s: 0,
    });
    client = new Client(service.url, opts.concurrency, { 'x-api-key': account.apiKey });
    const c = client;
    const probe = await c.request('POST', '/v1/validations', JSON.stringify({ phoneNumber: '420699999910' }));
    if (probe.status === 404) {
      await finish(ctx, service, 'verify');
      return {
        scenario: 'verify', ok: true, skipped: true,
        notes: ['POST /v1/validations answered 404: the verification API is not there yet; scenario skipped'],
      };
    }
    const notes: string[] = [];
    if (limits.status !== 200) {
      notes.push(`raising the account's verification rate limits failed: ${limits.status}`);
    }
    if (probe.status !== 200) {
      notes.push(`first POST /v1/validations answered ${probe.status}: ${probe.text.slice(0, 200)}`);
    }
    const phoneOf = (i: number) => `4207${pad6(i)}10`;
    const warm = opts.quick ? 50 : 300;
    await runBounded(opts.concurrency, warm, Date.now() + 10_000, async (i) => {
      await c.request('POST', '/v1/validations', JSON.stringify({ phoneNumber: phoneOf(900_000 + i) }));
    });
    const meter = new Meter(service.groups, new Set([service.db.name]), ctx.redis, service.rssPids, service.db.url);
    await meter.start();
    const pgSampler = await startPgSampler(ctx, service);
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    const started = performance.now();
    const count = await runBounded(opts.concurrency, opts.verifyStarts, Date.now() + opts.verifySeconds * 1000, async (i) => {
      const res = await c.request('POST', '/v1/validations', JSON.stringify({ phoneNumber: phoneOf(i) }));
      latencies.push(res.ms);
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    });
    const elapsedMs = performance.now() - started;
    const cpu = await meter.stop();
    const pgActivity = await pgSampler.stop('verify');
    const okStarts = statuses['200'] ?? 0;
    const { rows: [sms] } = await service.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM sandbox_messages');
    const done = await finish(ctx, service, 'verify', meter.window);
    return {
      scenario: 'verify',
      ok: okStarts === count && notes.length === 0,
      notes,
      carrier: 'sandbox',
      concurrency: opts.concurrency,
      starts: count,
      started: okStarts,
      seconds: r1(elapsedMs / 1000),
      startsPerS: rate(okStarts, elapsedMs),
      latencyMs: percentiles(latencies),
      statuses,
      codesHandedToSandboxByTheEnd: Number(sms!.n),
      cpu,
      cpuUsPerStart: costPer(cpu, okStarts),
      writeSyscallsPerStart: writesPer(cpu, okStarts),
      workPerStart: workPer(cpu, okStarts),
      rss: meter.rssSummary(),
      ...serviceFindings(done, pgActivity),
    };
  } catch (err) {
    await service.stop().catch(() => undefined);
    throw err;
  } finally {
    await client?.close().catch(() => undefined);
  }
}

export type { CpuReport, RssSummary, Percentiles };
