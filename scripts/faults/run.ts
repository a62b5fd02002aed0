/**
 * `npm run test:faults`: the fault suite of issue 22. Builds the service once, then starts, as child
 * processes it stops on exit (also on Ctrl-C and on errors): its own PostgreSQL cluster and Redis
 * (AOF) on free ports, every Procfile role as its own process (plus a second dispatch and status
 * process), the SMSC simulator with latency and decimal message ids, and a webhook receiver. It
 * sends a campaign while it injects faults one after another in a seeded order (kill -9 of each
 * role, Redis kill -9, Postgres immediate stop, SMSC link down, receiver down), waits for the
 * system to settle, and checks what every recipient, balance, event and process went through.
 * Prints the tables on stdout (progress on stderr); exits 1 when a check fails. `--help` for options.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import { killOrphans, spawnChild, stopChild } from '../bench/procs.js';
import { Cleanups, repoRoot, runHarness } from '../bench/lifecycle.js';
import { freePort } from '../bench/stack.js';
import { OwnPostgres, OwnRedis } from './infra.js';
import { Supervisor } from './roles.js';
import { parseCopies } from '../bench/copies.js';
import { EventReceiver } from './receiver.js';
import { Campaign } from './campaign.js';
import { runChecks, unsettledRecipients, type CheckRow, type SubmitsByDestination } from './checks.js';
import { INFRA_FAULTS, burstSizes, planEndMs, planFaults, resolveProcfile, scheduledDueTimes, type PlannedFault } from './plan.js';
import { parseFaultOptions, USAGE, type FaultOptions } from './options.js';
import { formatChecks, seconds, table } from './report.js';

const started = Date.now();
const log = (message: string) => process.stderr.write(`[faults +${Math.round((Date.now() - started) / 1000)}s] ${message}\n`);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const cleanups = new Cleanups(log);
const onCleanup = (fn: () => Promise<void>) => cleanups.add(fn);
const cleanupAll = () => cleanups.runAll();

const RUNS_DIR = path.join(os.tmpdir(), 'switchboard-faults');
/** The first delays of D4's webhook retry schedule (the service's default), before the ±20 % jitter. */
const WEBHOOK_FIRST_RETRIES_MS = [10_000, 60_000, 300_000];

/** Run directories of earlier runs whose suite process is gone (killed before it could clean up). */
function removeStaleRuns(): void {
  let entries: string[] = [];
  try {
    entries = readdirSync(RUNS_DIR);
  } catch {
    return;
  }
  for (const entry of entries) {
    const pid = Number(/^(\d+)-/.exec(entry)?.[1]);
    if (!pid || pid === process.pid || existsSync(`/proc/${pid}`) || existsSync(path.join(RUNS_DIR, entry, 'KEEP'))) {
      continue;
    }
    rmSync(path.join(RUNS_DIR, entry), { recursive: true, force: true });
    log(`removed ${entry}, left behind by an earlier run that was killed`);
  }
}

function build(root: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '--silent', 'build'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env: process.env });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`npm run build failed (exit ${code})`))));
  });
}

interface SimControl {
  port: number;
  stats(): Promise<{ counters: { submits: number; submitsAccepted: number; receiptsSent: number; receiptsAcked: number; receiptsNacked: number; binds: number; bindsRejected: number }; boundSessions: number; destinations: number }>;
  destinations(): Promise<SubmitsByDestination>;
  linkDown(ms: number): Promise<void>;
}

async function startSimulator(root: string, runDir: string, idForm: 'hex' | 'decimal', receiptDelayMs: number): Promise<SimControl> {
  const { child, ready } = await spawnChild<{ port: number; controlPort: number }>({
    name: 'smsc simulator',
    args: [path.join(root, 'dist/scripts/faults/smsc-child.js'), '--id-form', idForm, '--response-delay', '50', '--receipt-delay', String(receiptDelayMs)],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production' },
    cwd: root,
    logFile: path.join(runDir, 'smsc.log'),
    ready: (line) => (line.startsWith('{"event":"listening"') ? JSON.parse(line) as { port: number; controlPort: number } : null),
    readyTimeoutMs: 15_000,
  });
  onCleanup(async () => {
    await stopChild(child, 5000);
  });
  const base = `http://127.0.0.1:${ready.controlPort}`;
  const call = async <T>(method: string, route: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${base}${route}`, { method, ...(body !== undefined && { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }) });
    return await res.json() as T;
  };
  return {
    port: ready.port,
    stats: () => call('GET', '/stats'),
    destinations: async () => {
      const { destinations } = await call<{ destinations: Array<[string, number, number, number, number, number, string]> }>('GET', '/destinations');
      return new Map(destinations.map(([d, ...rest]) => [d.replace(/^\+/, ''), rest]));
    },
    linkDown: async (ms) => {
      await call('POST', '/link-down', { ms });
    },
  };
}

interface FaultRecord extends PlannedFault {
  target: string;
  injectedAt: number;
  /** When we began undoing it (restart, start, link or receiver back). */
  restoredAt: number;
  /** When it was undone (the process ready again). */
  upAt: number;
  note: string;
}

interface Sample {
  t: number;
  submits: number;
  delivered: number;
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseFaultOptions>;
  try {
    parsed = parseFaultOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n(see --help)\n`);
    return 2;
  }
  if (parsed === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const opts: FaultOptions = parsed;
  const root = repoRoot();
  mkdirSync(RUNS_DIR, { recursive: true });
  removeStaleRuns();
  const orphans = killOrphans();
  if (orphans > 0) {
    log(`stopped ${orphans} process(es) left running by an earlier run that was killed`);
  }
  const runDir = path.join(RUNS_DIR, `${process.pid}-${randomBytes(3).toString('hex')}`);
  mkdirSync(runDir, { recursive: true });
  onCleanup(async () => {
    if (opts.keep) {
      writeFileSync(path.join(runDir, 'KEEP'), '');
      log(`kept ${runDir} (logs, Postgres data directory, AOF)`);
    } else {
      rmSync(runDir, { recursive: true, force: true });
    }
  });
  const hardStop = setTimeout(() => {
    log(`the run took longer than --max-minutes ${opts.maxMinutes}; stopping everything`);
    void cleanupAll().then(() => process.exit(1));
  }, opts.maxMinutes * 60_000);
  hardStop.unref();
  const loads: number[] = [os.loadavg()[0]!];
  const loadTimer = setInterval(() => loads.push(os.loadavg()[0]!), 5000);
  loadTimer.unref();
  log(`seed ${opts.seed}, ${opts.recipients.toLocaleString('en-US')} recipients${opts.short ? ' (short)' : ''}; run directory ${runDir}; ` +
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  if (opts.build) {
    log('npm run build');
    await build(root);
  }

  // --- Postgres, Redis, the SMSC simulator, the webhook receiver -----------------------------
  const postgres = await OwnPostgres.create(runDir);
  onCleanup(() => postgres.stop());
  await postgres.start();
  const redis = await OwnRedis.create(runDir);
  onCleanup(() => redis.stop());
  await redis.start();
  log(`postgres on ${postgres.port}, redis (AOF) on ${redis.port}`);
  const sim = await startSimulator(root, runDir, opts.smscIds, opts.receiptDelayMs);
  const receiver = new EventReceiver();
  await receiver.start();
  onCleanup(() => receiver.stop());

  // --- The service, as the Procfile runs it ----------------------------------------------------
  const scripts = (JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const nodeFlags = readFileSync(path.join(root, 'scripts/node-flags'), 'utf8').trim().split(/\s+/);
  const procfile = resolveProcfile(readFileSync(path.join(root, 'Procfile'), 'utf8'), scripts, nodeFlags, 'dist/bin/switchboard.js');
  // `release` is a one-shot step (migrations) a process manager runs before the roles, not a role.
  const release = procfile.find((c) => c.role === 'release');
  const commands = procfile.filter((c) => c.role !== 'release');
  const roles = commands.map((c) => c.role);
  const known = [...roles, ...INFRA_FAULTS];
  const faultNames = opts.faults ?? known;
  const unknown = faultNames.filter((f) => !known.includes(f));
  if (unknown.length) {
    throw new Error(`unknown faults: ${unknown.join(', ')} (known: ${known.join(', ')})`);
  }
  const webPort = await freePort();
  const adminToken = randomBytes(24).toString('hex');
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    NODE_ENV: 'production',
    PORT: String(webPort),
    DATABASE_URL: postgres.url('switchboard'),
    REDIS_URL: redis.url,
    ADMIN_TOKEN: adminToken,
    CREDENTIALS_KEY: randomBytes(32).toString('hex'),
    ALLOW_PRIVATE_CALLBACKS: '1',
    SANDBOX: '0',
    SMPP_URL: `smpp://faults:faults@127.0.0.1:${sim.port}?tps=100000`,
    RECOVERY_SWEEP_MS: '2000',
    LOG_LEVEL: 'info',
  };
  if (release) {
    log('running the release step (migrations)');
    const argv = release.kind === 'node' ? [process.execPath, ...release.args] : ['sh', '-c', release.line];
    const done = spawnSync(argv[0]!, argv.slice(1), { cwd: root, env, encoding: 'utf8', timeout: 120_000 });
    if (done.status !== 0) throw new Error(`the release step failed (exit ${done.status}): ${done.stderr.slice(-2000)}`);
  }
  // Two copies of the roles whose kill -9 the other copy must cover (the notation of the benchmark's --copies).
  const supervisor = new Supervisor(commands, parseCopies(['worker_sms=2,worker_status=2']), env, root, runDir, log);
  onCleanup(() => supervisor.stopAll());
  await supervisor.startAll();
  log(`started ${supervisor.processes.map((p) => p.id).join(', ')}`);
  const origin = `http://127.0.0.1:${webPort}`;
  const admin = async <T>(method: string, route: string, body?: unknown): Promise<{ status: number; body: T }> => {
    const res = await fetch(`${origin}${route}`, {
      method, headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json() as T };
  };
  for (let i = 0; ; i++) {
    const h = await fetch(`${origin}/health`).then((r) => r.status).catch(() => 0);
    if (h === 200) {
      break;
    }
    if (i > 150) {
      throw new Error('/health did not answer 200 within 30 s');
    }
    await sleep(200);
  }
  // Every process that dispatches SMS binds: the two worker_sms and worker_priority (Procfile),
  // whether the Procfile runs it as a shell line or through npm's start script.
  const binders = supervisor.processes.filter((p) =>
    /--pools=\S*\bsms\b|\ball\b/.test(p.command.kind === 'shell' ? p.command.line : p.command.args.join(' '))).length;
  for (let i = 0; (await sim.stats()).boundSessions < binders && i < 100; i++) {
    await sleep(200);
  }
  log(`${(await sim.stats()).boundSessions} SMPP sessions bound (expected ${binders})`);

  const initialCredit = 100_000;
  const account = await admin<{ account_id: number; api_key: string }>('POST', '/admin/api/accounts', {
    name: 'faults', currency: 'CZK', credit_czk: initialCredit, default_sender: 'Faults',
  });
  if (account.status !== 201) {
    throw new Error(`creating the account failed: ${account.status} ${JSON.stringify(account.body)}`);
  }
  const prices = await admin('PUT', '/admin/api/prices', [{ channel: 'sms', prefix: '420', price_czk: 0.75, price_eur: 0.03 }]);
  if (prices.status !== 200) {
    throw new Error(`setting the price failed: ${prices.status} ${JSON.stringify(prices.body)}`);
  }

  // --- The campaign and the faults -------------------------------------------------------------
  const copies = Object.fromEntries(roles.map((r) => [r, supervisor.copiesOf(r).length]));
  // Scheduled messages come due every 2 s from the Postgres outage on, which is therefore planned
  // after the first minute (a send time 60 s ahead or nearer is sent at once).
  const SCHEDULED_FROM_MS = 64_000;
  const plan = planFaults(faultNames, opts.seed, opts.timing, copies, { postgres: SCHEDULED_FROM_MS + 1000 });
  const windowMs = planEndMs(plan) + opts.tailMs;
  log(`plan (seed ${opts.seed}): ${plan.map((f) => `${f.name}${(copies[f.name] ?? 1) > 1 ? `#${f.copy + 1}` : ''} at ${seconds(f.atMs)} s for ${seconds(f.downMs)} s`).join('; ')}`);
  const records: FaultRecord[] = [];
  const activeFault = () => {
    const now = Date.now();
    const f = records.find((r) => r.injectedAt <= now && (r.upAt === 0 || now <= r.upAt));
    return f ? f.name : '';
  };
  const t0 = Date.now();
  const campaign = new Campaign({
    origin, apiKey: account.body.api_key, callback: receiver.url, recipients: opts.recipients, concurrency: opts.concurrency,
    priorityIntervalMs: opts.priorityIntervalMs, deadline: t0 + windowMs + 180_000, activeFault,
  });
  const samples: Sample[] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const s = await sim.stats().catch(() => null);
      if (s) {
        samples.push({ t: Date.now(), submits: s.counters.submitsAccepted, delivered: receiver.delivered });
      }
      await sleep(500);
    }
  })();
  const progress = setInterval(() => {
    const last = samples[samples.length - 1];
    log(`accepted ${campaign.acknowledgedRecipients}, submitted ${last?.submits ?? 0}, webhook events ${receiver.events} (${receiver.delivered} delivered)` +
      `${activeFault() ? `; fault in progress: ${activeFault()}` : ''}`);
  }, 10_000);
  // A burst of the campaign at the start and one shortly before each fault (when the fault is
  // actually injected, not when it was planned: a slow restart pushes the next fault back), with
  // a flurry of priority messages across the injection.
  const bursts = burstSizes(campaign.callsTotal, plan.length);
  // Around the Postgres outage, and later: slow restarts push the faults back (by up to 16 s in a
  // short run on a busy machine), never forward.
  const pgFault = plan.find((f) => f.kind === 'postgres');
  const dueFrom = pgFault ? pgFault.atMs : SCHEDULED_FROM_MS;
  const dueTo = pgFault ? pgFault.atMs + pgFault.downMs + (opts.short ? 20_000 : 45_000) : planEndMs(plan);
  campaign.scheduled(scheduledDueTimes(dueFrom, dueTo, 2000).map((ms) => t0 + ms));
  campaign.burst(bursts[0]!);
  campaign.startPriority();
  for (const [k, f] of plan.entries()) {
    const wait = t0 + f.atMs - opts.burstLeadMs - Date.now();
    if (wait > 0) {
      await sleep(wait);
    }
    campaign.burst(bursts[k + 1]!);
    await sleep(opts.burstLeadMs - 1000);
    campaign.priorityFlurry(20, 100);
    await sleep(1000);
    const r: FaultRecord = { ...f, target: f.name, injectedAt: Date.now(), restoredAt: 0, upAt: 0, note: '' };
    records.push(r);
    await inject(r);
  }
  await sleep(opts.tailMs);
  campaign.stopPriority();
  await campaign.settled();

  /** Injects a fault, waits out its duration and undoes it, noting the times in `live`. */
  async function inject(live: FaultRecord): Promise<void> {
    const f: PlannedFault = live;
    switch (f.kind) {
      case 'kill': {
        const p = supervisor.copiesOf(f.name)[f.copy] ?? supervisor.copiesOf(f.name)[0]!;
        live.target = p.id;
        log(`fault: kill -9 ${p.id} (pid ${p.child?.pid}) for ${seconds(f.downMs)} s`);
        live.injectedAt = Date.now();
        await supervisor.kill9(p);
        await sleep(f.downMs);
        live.restoredAt = Date.now();
        const up = await supervisor.restartUntilUp(p, Date.now() + 120_000);
        live.note = up ? '' : 'did not come back within 120 s';
        break;
      }
      case 'redis': {
        log(`fault: kill -9 redis-server (pid ${redis.pid}) for ${seconds(f.downMs)} s, losing the AOF's last ${seconds(opts.redisLossMs)} s`);
        live.injectedAt = Date.now();
        const cut = await redis.kill9(opts.redisLossMs);
        live.target = `redis (AOF -${Math.round(cut / 1024)} KiB)`;
        await sleep(f.downMs);
        live.restoredAt = Date.now();
        await redis.start();
        break;
      }
      case 'postgres':
        log(`fault: postgres stopped in immediate mode (pid ${postgres.pid}) for ${seconds(f.downMs)} s`);
        live.injectedAt = Date.now();
        await postgres.stopImmediate();
        await sleep(f.downMs);
        live.restoredAt = Date.now();
        await postgres.start();
        break;
      case 'smsc':
        log(`fault: SMSC link dropped, binds refused for ${seconds(f.downMs)} s`);
        live.injectedAt = Date.now();
        await sim.linkDown(f.downMs);
        await sleep(f.downMs);
        live.restoredAt = Date.now();
        break;
      case 'receiver':
        log(`fault: webhook receiver down for ${seconds(f.downMs)} s`);
        live.injectedAt = Date.now();
        await receiver.stop();
        await sleep(f.downMs);
        live.restoredAt = Date.now();
        await receiver.start();
        break;
    }
    live.upAt = Date.now();
    log(`fault ${live.target} undone after ${seconds(live.upAt - live.injectedAt)} s${live.note ? ` (${live.note})` : ''}`);
  }

  log(`campaign sent: ${campaign.acknowledgedRecipients} recipients acknowledged in ${campaign.calls} calls (${campaign.retries} retries, ` +
    `${campaign.abandoned} given up); faults done`);

  // --- Settle ----------------------------------------------------------------------------------
  const db = new pg.Pool({ connectionString: postgres.url('switchboard'), max: 2 });
  db.on('error', () => undefined);
  onCleanup(() => db.end());
  const accountId = account.body.account_id;
  const settleStart = Date.now();
  let lastSignature = '';
  let lastChange = Date.now();
  let settled = false;
  let unsettled = '';
  // A webhook batch that failed while its receiver was down waits for its next retry (D4: 10 s,
  // 1 min, 5 min, ±20 %): a 60 s outage can leave one waiting five minutes. While such a retry is
  // still ahead the wait is not cut short for lack of progress, and it may run past --settle, by
  // up to half of it.
  let retryAhead = 0;
  while (Date.now() - settleStart < Math.max(opts.settleMs, Math.min(opts.settleMs * 1.5, retryAhead - settleStart))) {
    try {
      const u = await unsettledRecipients(db, accountId);
      const { rows: [o] } = await db.query<{ outbox: string; pending: string; events: string; retry_ahead: number | null }>(
        `SELECT (SELECT count(*) FROM outbox) AS outbox, (SELECT count(*) FROM webhook_batches WHERE status = 'pending') AS pending,
                (SELECT count(*) FROM events WHERE account_id = $1 AND callback_url IS NOT NULL) AS events,
                (SELECT max(extract(epoch FROM updated_at) * 1000 + 1.2 * ($2::float8[])[attempts] + 15000) FROM webhook_batches
                  WHERE status = 'pending' AND attempts BETWEEN 1 AND cardinality($2::float8[]))::float8 AS retry_ahead`,
        [accountId, WEBHOOK_FIRST_RETRIES_MS]);
      retryAhead = o!.retry_ahead ?? 0;
      unsettled = `${u.wrong} recipients not at their expected result${u.wrong ? ` (${[...u.byKind].map(([k, v]) => `${k} ${v}`).join(', ')})` : ''}, ` +
        `${o!.outbox} outbox rows, ${o!.pending} pending webhook batches, ${receiver.distinct}/${o!.events} events received`;
      if (u.wrong === 0 && Number(o!.outbox) === 0 && Number(o!.pending) === 0 && receiver.distinct >= Number(o!.events)) {
        settled = true;
        break;
      }
      const signature = `${unsettled}|${receiver.events}`;
      if (signature !== lastSignature) {
        lastSignature = signature;
        lastChange = Date.now();
      } else if (Date.now() - lastChange > opts.settleStallMs && Date.now() > retryAhead) {
        log(`no progress for ${seconds(Date.now() - lastChange)} s: ${unsettled}`);
        break;
      }
    } catch (err) {
      unsettled = `Postgres: ${(err as Error).message}`;
    }
    await sleep(3000);
  }
  const settleMs = Date.now() - settleStart;
  log(settled ? `settled ${seconds(settleMs)} s after the campaign and the faults` : `did not settle within ${seconds(settleMs)} s: ${unsettled}`);
  await sleep(2000); // late duplicates
  sampling = false;
  await sampler;
  clearInterval(progress);

  // --- Checks ----------------------------------------------------------------------------------
  const submits = await sim.destinations();
  const faultAt = (t: number) => {
    let name = '';
    for (const r of records) {
      if (r.injectedAt <= t) {
        name = r.target;
      }
    }
    return name;
  };
  const checks = await runChecks({ db, accountId, initialCredit, campaign, receiver, submits, faultAt });
  checks.push(...await serviceChecks(supervisor, campaign, redis.url));
  checks.unshift({
    check: 'the system settled',
    verdict: settled ? 'PASS' : 'FAIL',
    detail: settled ? `within ${seconds(settleMs)} s after the campaign and the faults` : `not within ${seconds(settleMs)} s: ${unsettled}`,
  });

  const faultRows = faultTable(records, samples, campaign, submits, campaign.answers);
  const roleRows = supervisor.processes.map((p) => [
    p.id, p.starts, p.unexpectedExits.length ? p.unexpectedExits.map((e) => `${e.how} at ${seconds(e.atMs)} s`).join(', ') : '0',
    p.lines.json, p.lines.rawStdout, p.lines.rawStderr, p.lines.errors,
  ]);
  const simStats = await sim.stats();
  const latencies = acceptToSubmit(campaign, submits);
  const load = `load average (1 min) ${loads[0]!.toFixed(2)} at start, max ${Math.max(...loads).toFixed(2)}, ${os.loadavg()[0]!.toFixed(2)} at the end (${os.availableParallelism()} cores)`;

  const out: string[] = [];
  const scheduledN = [...campaign.accepted.values()].filter((a) => a.dueAt > 0).length;
  out.push(`fault suite: seed ${opts.seed}, ${opts.recipients.toLocaleString('en-US')} recipients + ${campaign.prioritySent} priority messages ` +
    `+ ${scheduledN} scheduled recipients, ` +
    `${records.length} faults${opts.short ? ' (short)' : ''}; ${Math.round((Date.now() - started) / 1000)} s; ${load}`);
  out.push('', 'Faults (times in s from the injection; "moved" = the counter grew again after the fault was undone)', table(
    ['fault', 'target', 'at', 'outage', 'submits moved', 'delivered moved', 'longest delivered stall', 'slowest accept→submit (bulk / priority)', 'submitted twice', 'API answers meanwhile'],
    faultRows,
  ));
  out.push('', 'Processes (output lines: JSON, raw on stdout, raw on stderr; error = JSON lines at level >= 50)', table(
    ['process', 'starts', 'exited on its own', 'JSON', 'raw stdout', 'raw stderr', 'error'], roleRows,
  ));
  const rawExamples = supervisor.processes.flatMap((p) => p.lines.examples.slice(0, 3).map((e) => `  ${p.id} ${e}`));
  if (rawExamples.length) {
    out.push('', 'First raw lines per process:', ...rawExamples);
  }
  out.push('', `SMSC: ${simStats.counters.submits} submit_sm (${simStats.counters.submitsAccepted} accepted), ${simStats.counters.binds} binds ` +
    `(${simStats.counters.bindsRejected} refused), ${simStats.counters.receiptsSent} receipts sent (${simStats.counters.receiptsAcked} acknowledged, ` +
    `${simStats.counters.receiptsNacked} not: sent again); accept→submit bulk ${latencies.bulk}, priority ${latencies.priority}`);
  if (campaign.oddAnswers.length) {
    out.push('API answers other than 200 (first ones):', ...campaign.oddAnswers.map((a) => `  ${a}`));
  }
  out.push('', 'Checks', formatChecks(checks));
  const failed = checks.filter((c) => c.verdict === 'FAIL');
  out.push('', failed.length ? `FAILED: ${failed.length} of ${checks.filter((c) => c.verdict !== 'INFO').length} checks` : 'PASSED: every check');
  process.stdout.write(`${out.join('\n')}\n`);
  if (opts.out) {
    writeFileSync(opts.out, `${JSON.stringify({ seed: opts.seed, recipients: opts.recipients, short: opts.short, checks, faults: records, processes: supervisor.processes.map((p) => ({ id: p.id, starts: p.starts, unexpectedExits: p.unexpectedExits, lines: p.lines })), load: loads }, null, 2)}\n`);
  }
  clearTimeout(hardStop);
  return failed.length ? 1 : 0;
}

/** The service-level checks: API answers during outages, structured output, crashes, jobs given up. */
async function serviceChecks(supervisor: Supervisor, campaign: Campaign, redisUrl: string): Promise<CheckRow[]> {
  const rows: CheckRow[] = [];
  const byStatus = new Map<string, number>();
  const fiveHundreds: string[] = [];
  for (const [fault, m] of campaign.answers) {
    for (const [status, n] of m) {
      byStatus.set(status, (byStatus.get(status) ?? 0) + n);
      if (/^5/.test(status) && status !== '503') {
        fiveHundreds.push(`${n} × ${status} during ${fault || 'no fault'}`);
      }
    }
  }
  rows.push({
    check: 'storage outages answered 503, never 500 (sending API)',
    verdict: fiveHundreds.length === 0 ? 'PASS' : 'FAIL',
    detail: `answers: ${[...byStatus].map(([s, n]) => `${s} × ${n}`).join(', ')}${fiveHundreds.length ? `; other 5xx: ${fiveHundreds.join(', ')}` : ''}`,
  });
  const raw = supervisor.processes.filter((p) => p.lines.rawStdout + p.lines.rawStderr > 0);
  rows.push({
    check: 'every process logged JSON lines only',
    verdict: raw.length === 0 ? 'PASS' : 'FAIL',
    detail: raw.length === 0 ? `${supervisor.processes.reduce((a, p) => a + p.lines.json, 0)} JSON lines, no raw line`
      : `raw lines (stdout + stderr): ${raw.map((p) => `${p.id} ${p.lines.rawStdout} + ${p.lines.rawStderr}`).join(', ')}`,
    ...(raw.length && { examples: raw.slice(0, 3).flatMap((p) => p.lines.examples.slice(0, 2).map((e) => `${p.id} ${e}`)) }),
  });
  const exited = supervisor.processes.filter((p) => p.unexpectedExits.length > 0);
  rows.push({
    check: 'no process exited on its own',
    verdict: exited.length === 0 ? 'PASS' : 'FAIL',
    detail: exited.length === 0 ? 'only the killed processes were restarted'
      : exited.map((p) => `${p.id}: ${p.unexpectedExits.map((e) => `${e.how} at ${seconds(e.atMs)} s`).join(', ')}`).join('; '),
  });
  // Jobs BullMQ gave up on: they are never run again under their id (the sweep re-adds the same id).
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 2, lazyConnect: true });
  try {
    await redis.connect();
    const failed: string[] = [];
    const left = new Map<string, number>();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const m = /^(.*):(failed|wait|active|delayed|prioritized|paused)$/.exec(key);
        if (!m) {
          continue;
        }
        const type = await redis.type(key);
        const n = type === 'zset' ? await redis.zcard(key) : type === 'list' ? await redis.llen(key) : 0;
        if (n > 0) {
          if (m[2] === 'failed') {
            // Job ids tell the producer: c. = a call's job (accept), m./r. = a message's or recipient's (scheduled, later steps, the sweep).
            const ids = await redis.zrange(key, '0', '-1');
            const kinds = new Map<string, number>();
            for (const id of ids) {
              const k = `${id.split('.')[0]}.`;
              kinds.set(k, (kinds.get(k) ?? 0) + 1);
            }
            failed.push(`${m[1]} ${n} (${[...kinds].map(([k, v]) => `${k} ${v}`).join(', ')})`);
          } else {
            left.set(m[2]!, (left.get(m[2]!) ?? 0) + n);
          }
        }
      }
    } while (cursor !== '0');
    const sweeps = supervisor.processes.reduce((a, p) => ({ lines: a.lines + p.lines.sweeps.lines, dispatch: a.dispatch + p.lines.sweeps.dispatch, lastAt: Math.max(a.lastAt, p.lines.sweeps.lastAt) }), { lines: 0, dispatch: 0, lastAt: 0 });
    rows.push({
      check: 'no job left in a failed set (Redis)',
      verdict: failed.length === 0 ? 'PASS' : 'FAIL',
      detail: `${failed.length ? `failed: ${failed.join(', ')}` : 'no failed jobs'}; other jobs left: ${[...left].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}; ` +
        `the recovery sweep re-added ${sweeps.dispatch} dispatch job(s) in ${sweeps.lines} pass(es)` +
        `${sweeps.lastAt ? `, the last ${seconds(Date.now() - sweeps.lastAt)} s before this check` : ''}`,
    });
  } catch (err) {
    rows.push({ check: 'no job left in a failed set (Redis)', verdict: 'FAIL', detail: `could not read Redis: ${(err as Error).message}` });
  } finally {
    redis.disconnect();
  }
  return rows;
}

function faultTable(records: FaultRecord[], samples: Sample[], campaign: Campaign, submits: SubmitsByDestination, answers: Map<string, Map<string, number>>): string[][] {
  const valueAt = (t: number, key: 'submits' | 'delivered') => {
    let v = 0;
    for (const s of samples) {
      if (s.t > t) {
        break;
      }
      v = s[key];
    }
    return v;
  };
  /** First time after `from` that the counter grew, in ms after `origin`; null when it did not before `until`. */
  const movedAt = (from: number, until: number, key: 'submits' | 'delivered', origin: number) => {
    const base = valueAt(from, key);
    const s = samples.find((x) => x.t > from && x.t <= until && x[key] > base);
    return s ? s.t - origin : null;
  };
  // The last time the delivered count grew: after it there was nothing left to deliver.
  const lastDelivery = samples.reduce((t, s, i) => (i > 0 && s.delivered > samples[i - 1]!.delivered ? s.t : t), samples[0]?.t ?? 0);
  /** Longest time the delivered count stood still between `from` and `until` (while work was left). */
  const longestStall = (from: number, until: number) => {
    const end = Math.min(until, lastDelivery);
    let last = from;
    let prev = valueAt(from, 'delivered');
    let longest = 0;
    for (const s of samples) {
      if (s.t <= from || s.t > end) {
        continue;
      }
      if (s.delivered > prev) {
        longest = Math.max(longest, s.t - last);
        last = s.t;
        prev = s.delivered;
      }
    }
    return Math.max(longest, end - last);
  };
  const end = samples[samples.length - 1]?.t ?? Date.now();
  return records.map((r, i) => {
    const next = records[i + 1]?.injectedAt ?? end;
    // Messages accepted from just before the injection (the burst's and the flurry's) until just
    // before the next one.
    const from = r.injectedAt - 1500;
    const until = records[i + 1] ? next - 1500 : end;
    let bulk = 0;
    let priority = 0;
    for (const a of campaign.accepted.values()) {
      const start = Math.max(a.acceptedAt, a.dueAt);
      if (start < from || start >= until) {
        continue;
      }
      const s = submits.get(a.phone);
      const latency = s ? Math.max(0, s[2] - start) : Number.POSITIVE_INFINITY;
      if (a.priority) {
        priority = Math.max(priority, latency);
      } else {
        bulk = Math.max(bulk, latency);
      }
    }
    let twice = 0;
    for (const [submitsN, , firstAt] of submits.values()) {
      if (submitsN > 1 && firstAt + 1000 >= r.injectedAt && firstAt + 1000 < next) {
        twice++;
      }
    }
    const due = [...campaign.accepted.values()].filter((a) => a.dueAt >= r.injectedAt && a.dueAt <= r.upAt).length;
    const during = answers.get(r.name);
    const fmt = (ms: number) => (Number.isFinite(ms) ? seconds(ms) : 'never');
    return [
      r.name, due ? `${r.target} (${due} scheduled due)` : r.target, seconds(r.injectedAt - started), seconds(r.upAt - r.injectedAt),
      seconds(movedAt(r.restoredAt, next, 'submits', r.injectedAt)), seconds(movedAt(r.restoredAt, next, 'delivered', r.injectedAt)),
      seconds(longestStall(r.injectedAt, next)), `${fmt(bulk)} / ${fmt(priority)}`, String(twice),
      during ? [...during].map(([s, n]) => `${s}×${n}`).join(' ') : '-',
    ];
  });
}

function acceptToSubmit(campaign: Campaign, submits: SubmitsByDestination): { bulk: string; priority: string } {
  const bulk: number[] = [];
  const priority: number[] = [];
  for (const a of campaign.accepted.values()) {
    const s = submits.get(a.phone);
    if (s) {
      (a.priority ? priority : bulk).push(Math.max(0, s[2] - Math.max(a.acceptedAt, a.dueAt)));
    }
  }
  const summary = (xs: number[]) => {
    if (xs.length === 0) {
      return '-';
    }
    xs.sort((a, b) => a - b);
    const at = (q: number) => xs[Math.min(xs.length - 1, Math.ceil(q * xs.length) - 1)]!;
    return `p50 ${seconds(at(0.5))} s, p99 ${seconds(at(0.99))} s, max ${seconds(xs[xs.length - 1])} s`;
  };
  return { bulk: summary(bulk), priority: summary(priority) };
}

runHarness(main, cleanups, log, 'the fault suite');
