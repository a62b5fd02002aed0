/**
 * Scenario `e2e-kannel`: the reference issue 23 states its throughput target against ("about twice
 * Kannel's figure here"), measured by the same harness, against the same SMSC simulator, in the
 * same minutes as e2e-smpp. This VM's speed drifts several-fold between days (docs/benchmarks.md),
 * so a figure of the service means little without Kannel's of the same phase.
 *
 * The workload is e2e-smpp's: the same numbers, outcomes and text, 100 recipients per HTTP request
 * with `--concurrency` requests in flight, through Kannel 1.4.5 (Debian's `kannel` package):
 * `sendsms` on smsbox → bearerbox → SMPP `submit_sm` at the simulator (its ids, `--smsc-ids`, and
 * its receipts after `--receipt-delay`) → one `dlr-url` GET per delivery report to the harness's
 * receiver. Kannel's configuration mirrors the service's SMPP_URL: one transceiver session, a
 * window of 50 (`max-pending-submits`), a throughput cap that never binds (`throughput = 100000`),
 * the id forms left to Kannel (no `msg-id-type`, as `auto`). What Kannel keeps is its default: the
 * delivery-report map in memory (`dlr-storage = internal`) and no message store, so it writes
 * nothing durable, where the service commits every recipient to Postgres; `--kannel-storage`
 * chooses the durable configurations operators run at volume instead (`STORAGES`). Its consoles run at
 * `-v 4` (panics only): at Kannel's default, debug lines to the console, 20,000 recipients moved
 * at less than half the rate (docs/benchmarks.md, fourteenth session).
 *
 * Reports per recipient: `sent` (report type 8, the SMSC accepted it), then `delivered` (1) or
 * `undelivered` (2); e2e-smpp's `sending` event has no counterpart. Skipped with a note when
 * `bearerbox` and `smsbox` are not installed.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Meter, costPer, writesPer } from './meter.js';
import { Client, percentiles, runBounded, sleep } from './load.js';
import { Receiver, type QueryEvent } from './receiver.js';
import type { Options } from './options.js';
import { createDatabase, deleteRedisPrefix, freePort, startSimulator, type Ctx, type Simulator } from './stack.js';
import { spawnChild, stopChild, type Child } from './procs.js';
import { backlogPhone, checkEvents, expectedResults, rate, r1, waitWithStall, warmupPhone, type ScenarioResult } from './scenarios.js';

/** Kannel's delivery-report types (`%d` of a dlr-url) as the results e2e-smpp's webhooks name. */
const REPORT_RESULTS: Record<string, string> = { 1: 'delivered', 2: 'undelivered', 4: 'buffered', 8: 'sent', 16: 'rejected' };
/**
 * `--kannel-reports`: the `dlr-mask` asked for and the reports it gives each number (as results).
 * `all` is e2e-smpp's workload: SMSC accepted (8) and rejected (16), delivered (1), undelivered (2);
 * e2e-smpp's `sending` has no counterpart. `final`: delivered or undelivered only. `none`: no
 * dlr-url at all (the run ends at the last submit_sm).
 */
export const REPORT_MODES = {
  all: { mask: 1 + 2 + 8 + 16, expected: (phone: string) => expectedResults(phone).filter((r) => r !== 'sending') },
  final: { mask: 1 + 2, expected: (phone: string) => expectedResults(phone).filter((r) => r !== 'sending' && r !== 'sent') },
  none: { mask: 0, expected: (): string[] => [] },
} as const;

/** One delivery report per GET: `?key=<%p>&type=<%d>`. */
export const reportFromQuery: QueryEvent = (q) => {
  const key = q.get('key');
  const type = q.get('type');
  return key && type ? { key, result: REPORT_RESULTS[type] ?? `type ${type}` } : null;
};

/** Where Debian installs the two boxes; PATH first. */
function findBox(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':').filter(Boolean), '/usr/sbin', '/usr/local/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    if (existsSync(file)) return file;
  }
  return null;
}

interface KannelPorts {
  admin: number;
  smsbox: number;
  sendsms: number;
}

/** Where Kannel keeps what it must remember: lines of its core group, groups of their own, and their removal. */
export interface KannelStorage {
  /** Lines of `group = core` (`dlr-storage`, `store-type`, …). */
  core: string[];
  /** Further groups (a database connection, `dlr-db`, `store-db`). */
  groups: string[];
  /** Removes what the run left in Redis or Postgres. */
  cleanup(): Promise<void>;
  /** For the result: what the configuration keeps where. */
  label: string;
  /** Postgres databases Kannel uses (their backends' CPU is Kannel's, as the service's is its). */
  databases: string[];
}

/** The field names of Kannel's `dlr-db` group, the same for every database (its examples' names). */
const DLR_FIELDS = [
  'field-smsc = smsc', 'field-timestamp = ts', 'field-destination = destination', 'field-source = source', 'field-service = service',
  'field-url = url', 'field-mask = mask', 'field-status = status', 'field-boxc-id = boxc',
];

/**
 * `--kannel-storage`: Kannel's defaults (`memory`: the report map in memory, searched one entry
 * after another, and no message store), or what an operator running it at volume configures: the
 * report map and the message store in Redis (`redis`, the service's Redis, under keys of this run),
 * or the report map in a Postgres table of its own (`pgsql`, in a database of this run, with the
 * index on smsc and ts that its lookups need) and the message store in a spool directory (Kannel
 * 1.4.5 has no Postgres message store).
 */
export const STORAGES: Record<Options['kannelStorage'], (ctx: Ctx, dir: string) => Promise<KannelStorage>> = {
  memory: async () => ({ core: ['dlr-storage = internal'], groups: [], cleanup: async () => undefined, label: 'dlr-storage internal, no store', databases: [] }),
  redis: async (ctx) => {
    const url = new URL(ctx.redisUrl);
    const prefix = `sb_bench_${ctx.id}_kannel`;
    const connection = ['group = redis-connection', 'id = bench', `host = ${url.hostname || '127.0.0.1'}`, `port = ${url.port || 6379}`,
      `database = ${Number(url.pathname.slice(1)) || 0}`, 'max-connections = 1', ''];
    // Both tables are `<prefix>:…`, and Kannel's keys extend them: one prefix removes everything.
    const remove = async () => {
      await deleteRedisPrefix(ctx.redis, prefix);
    };
    const unregister = ctx.onCleanup(remove);
    return {
      core: ['dlr-storage = redis', 'store-type = redis'],
      groups: [...connection, 'group = dlr-db', 'id = bench', `table = ${prefix}:dlr`, ...DLR_FIELDS, '',
        'group = store-db', 'id = bench', `table = ${prefix}:store`, ''],
      cleanup: async () => {
        unregister();
        await remove();
      },
      label: 'dlr-storage redis, store-type redis',
      databases: [],
    };
  },
  pgsql: async (ctx, dir) => {
    const db = await createDatabase(ctx, 'kannel');
    await db.pool.query(`CREATE TABLE dlr (smsc varchar(48), ts varchar(64), destination varchar(48), source varchar(48), service varchar(48),
      url text, mask integer, status integer DEFAULT 0, boxc varchar(48))`);
    await db.pool.query('CREATE INDEX dlr_smsc_ts ON dlr (smsc, ts)');
    const url = new URL(db.url);
    const spool = path.join(dir, 'spool');
    mkdirSync(spool, { recursive: true });
    return {
      core: ['dlr-storage = pgsql', 'store-type = spool', `store-location = "${spool}"`],
      groups: ['group = pgsql-connection', 'id = bench', `host = ${url.hostname}`, `port = ${url.port || 5432}`,
        `username = ${decodeURIComponent(url.username) || 'postgres'}`, `password = "${decodeURIComponent(url.password)}"`,
        `database = ${db.name}`, 'max-connections = 1', '',
        'group = dlr-db', 'id = bench', 'table = dlr', ...DLR_FIELDS, ''],
      cleanup: () => db.drop(),
      label: 'dlr-storage pgsql (indexed on smsc, ts), store-type spool',
      databases: [db.name],
    };
  },
};

/** kannel.conf for one run: the service's SMPP settings; what Kannel keeps where `storage` says. */
export function kannelConfig(dir: string, ports: KannelPorts, smscPort: number, storage: Pick<KannelStorage, 'core' | 'groups'>): string {
  return [
    'group = core',
    `admin-port = ${ports.admin}`,
    'admin-password = bench',
    'status-password = bench',
    `smsbox-port = ${ports.smsbox}`,
    'box-allow-ip = 127.0.0.1',
    'log-level = 3',
    `log-file = "${path.join(dir, 'bearerbox.log')}"`,
    ...storage.core,
    '',
    'group = smsc',
    'smsc = smpp',
    'smsc-id = sim',
    'host = 127.0.0.1',
    `port = ${smscPort}`,
    'transceiver-mode = true',
    'smsc-username = bench',
    'smsc-password = bench',
    'system-type = ""',
    'max-pending-submits = 50',
    'throughput = 100000',
    'enquire-link-interval = 30',
    '',
    'group = smsbox',
    'bearerbox-host = 127.0.0.1',
    `sendsms-port = ${ports.sendsms}`,
    'log-level = 3',
    `log-file = "${path.join(dir, 'smsbox.log')}"`,
    '',
    'group = sendsms-user',
    'username = bench',
    'password = bench',
    '',
    ...storage.groups,
  ].join('\n');
}

/** GET path of one `sendsms` request for `phones`, reports of `mask` to `dlrUrl` (mask 0: none asked for). */
function sendsmsPath(phones: string[], text: string, mask: number, dlrUrl: string): string {
  return `/cgi-bin/sendsms?username=bench&password=bench&from=Bench&to=${phones.join('+')}&text=${encodeURIComponent(text)}` +
    `${mask ? `&dlr-mask=${mask}&dlr-url=${encodeURIComponent(dlrUrl)}` : ''}`;
}

/** Waits until the simulator accepted `target` submits (no reports to wait for), or stalls for `stallMs`. */
async function waitForSubmits(sim: Simulator, target: number, deadline: number, stallMs: number, died: () => boolean): Promise<boolean> {
  let last = -1;
  let lastChange = Date.now();
  while (Date.now() < deadline && !died()) {
    const submits = (await sim.stats()).counters.submitsAccepted;
    if (submits >= target) return true;
    if (submits !== last) {
      last = submits;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > stallMs) {
      return false;
    }
    await sleep(50);
  }
  return false;
}

async function adminStatus(adminPort: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/status.txt?password=bench`, { signal: AbortSignal.timeout(2000) });
  return res.text();
}

export async function e2eKannelScenario(ctx: Ctx): Promise<ScenarioResult> {
  const { opts } = ctx;
  const bearerbox = findBox('bearerbox');
  const smsbox = findBox('smsbox');
  if (!bearerbox || !smsbox) {
    return {
      scenario: 'e2e-kannel', ok: true, skipped: true,
      notes: ['Kannel is not installed (bearerbox and smsbox are not on PATH or in /usr/sbin); Debian: apt-get install kannel'],
    };
  }
  const notes: string[] = [];
  const dir = path.join(ctx.runDir, 'kannel');
  mkdirSync(dir, { recursive: true });
  const sim = await startSimulator(ctx);
  const boxes: Child[] = [];
  const unregister: Array<() => void> = [];
  const receiver = new Receiver('kannel', () => null, 0, reportFromQuery);
  let client: Client | null = null;
  let storage: KannelStorage | null = null;
  try {
    const ports: KannelPorts = { admin: await freePort(), smsbox: await freePort(), sendsms: await freePort() };
    const conf = path.join(dir, 'kannel.conf');
    storage = await STORAGES[opts.kannelStorage](ctx, dir);
    writeFileSync(conf, kannelConfig(dir, ports, sim.port, storage));
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const start = async (name: string, file: string, probe: () => Promise<boolean>) => {
      const { child } = await spawnChild({
        name, command: file, args: ['-v', '4', conf], env, cwd: dir, logFile: path.join(dir, `${name}.out`),
        readyProbe: probe, readyTimeoutMs: 20_000,
      });
      boxes.push(child);
      unregister.push(ctx.onCleanup(() => stopChild(child, 5000).then(() => undefined)));
    };
    // bearerbox is ready once its SMPP session is bound; smsbox once bearerbox lists it.
    await start('bearerbox', bearerbox, async () => /\(online \d/.test(await adminStatus(ports.admin)));
    await start('smsbox', smsbox, async () => /smsbox:.*on-line/.test(await adminStatus(ports.admin)));
    await receiver.start();
    const mode = REPORT_MODES[opts.kannelReports];
    const reports = mode.mask > 0;
    const dlrUrl = `${receiver.url}?key=%p&type=%d`;
    const expectedOf = mode.expected;
    // The end of a send: every report arrived or, with none asked for, every submit_sm was accepted.
    const stallMs = opts.quick ? 8000 : 30_000;
    const waitDone = (phones: string[], deadline: number, died: () => boolean = () => false) => (reports
      ? waitWithStall(receiver, phones.reduce((a, p) => a + expectedOf(p).length, 0), deadline, stallMs, died)
      : waitForSubmits(sim, phones.length, deadline, stallMs, died));
    client = new Client(`http://127.0.0.1:${ports.sendsms}`, opts.concurrency);
    const c = client;
    const text = 'Your weekly offer: 20 % off everything';
    const send = async (phones: string[], deadline: number, onAnswer: (status: number, ms: number, n: number) => void) => {
      await runBounded(opts.concurrency, Math.ceil(phones.length / 100), deadline, async (i) => {
        const batch = phones.slice(i * 100, i * 100 + 100);
        const res = await c.request('GET', sendsmsPath(batch, text, mode.mask, dlrUrl));
        onAnswer(res.status, res.ms, batch.length);
      });
    };

    // Warm-up: e2e-smpp's, so that both run the same numbers of recipients before measuring.
    let warmup: { recipients: number; seconds: number; complete: boolean } | null = null;
    if (opts.warmup > 0) {
      const started = Date.now();
      const phones = Array.from({ length: opts.warmup }, (_, k) => warmupPhone(k));
      const deadline = started + 60_000 + opts.warmup * 10;
      await send(phones, deadline, () => undefined);
      const complete = await waitDone(phones, deadline);
      await sleep(opts.quick ? 200 : 500);
      receiver.reset();
      await sim.reset();
      warmup = { recipients: phones.length, seconds: r1((Date.now() - started) / 1000), complete };
      if (!complete) notes.push(`the warm-up's ${phones.length} recipients did not all get their reports within ${warmup.seconds} s`);
    }

    const n = opts.recipients;
    const phones = Array.from({ length: n }, (_, i) => backlogPhone(i));
    const expectedEvents = phones.reduce((a, p) => a + expectedOf(p).length, 0);
    const pids = boxes.map((b) => b.pid);
    const meter = new Meter({ service: pids, simulator: [sim.child.pid] }, new Set(storage.databases), ctx.redis,
      { 'service.bearerbox': boxes[0]!.pid, 'service.smsbox': boxes[1]!.pid, simulator: sim.child.pid });
    await meter.start();
    const t0 = Date.now();
    const deadline = t0 + (opts.quick ? 20_000 : 60_000) + n * 10;
    const latencies: number[] = [];
    const statuses: Record<string, number> = {};
    let accepted = 0;
    let lastAcceptAt = 0;
    const progress = setInterval(() => {
      void sim.stats().then((s) => ctx.log(`e2e-kannel +${Math.round((Date.now() - t0) / 1000)} s: accepted ${accepted}/${n}, ` +
        `submit_sm ${s.counters.submits}, receipts ${s.counters.receiptsSent}, reports ${receiver.events}/${expectedEvents}`), () => undefined);
    }, 5000);
    let complete: boolean;
    try {
      await send(phones, deadline, (status, ms, count) => {
        latencies.push(ms);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status === 202) accepted += count;
        lastAcceptAt = Date.now();
      });
      const died = () => [...boxes, sim.child].some((b) => !b.alive());
      complete = await waitDone(phones, deadline, died);
      for (const b of [...boxes, sim.child]) {
        if (!b.alive()) notes.push(`${b.name} exited (${await b.exited}) during the run; the figures are not valid (see its log in ${dir})`);
      }
    } finally {
      clearInterval(progress);
    }
    const cpu = await meter.stop();
    // Kannel's status page at the end of the run, kept beside its logs; it names the report storage
    // in use ("DLR: 7 queued, using redis storage").
    const status = await adminStatus(ports.admin).catch(() => '');
    writeFileSync(path.join(dir, 'status.txt'), status);
    const dlrStorage = /using (\S+) storage/.exec(status)?.[1] ?? null;
    const rss = meter.rssSummary();
    if (!complete) notes.push(`stopped waiting after ${Math.round((Date.now() - t0) / 1000)} s with ${receiver.events} of ${expectedEvents} reports`);
    // Every recipient submitted once and only once (each has a number of its own).
    const repeats = await sim.repeats();
    if (repeats.repeated > 0 || repeats.destinations !== n) notes.push(`submits: ${repeats.destinations} of ${n} numbers, ${repeats.repeated} submitted more than once`);
    await sleep(opts.quick ? 500 : 1500); // late duplicates would arrive now
    // Without reports there are no events to check; the submits are checked below.
    const check = reports ? checkEvents(receiver, phones, false, expectedOf) : null;
    const simStats = await sim.stats();
    // The end of the work: the last report, or without reports the last submit_sm.
    const lastEventAt = reports ? receiver.lastAt : simStats.lastSubmitAt;
    const ms = (t: number) => (t > 0 ? t - t0 : 0);
    const requests = Math.ceil(n / 100);
    return {
      scenario: 'e2e-kannel',
      ok: (check?.passed ?? receiver.events === 0) && complete && (statuses['202'] ?? 0) === requests && repeats.repeated === 0 && repeats.destinations === n,
      notes,
      kannel: { bearerbox, smsbox, config: `transceiver, max-pending-submits 50, throughput 100000, ${storage.label}, -v 4` },
      storage: opts.kannelStorage,
      dlrStorage,
      smscIds: opts.smscIds,
      reportsAskedFor: opts.kannelReports,
      dlrMask: mode.mask,
      recipients: n,
      warmup,
      concurrency: opts.concurrency,
      accepted,
      acceptedPerS: rate(accepted, ms(lastAcceptAt)),
      acceptLatencyMs: percentiles(latencies),
      acceptStatuses: statuses,
      submits: simStats.counters.submitsAccepted,
      submitsPerS: rate(simStats.counters.submitsAccepted, ms(simStats.lastSubmitAt)),
      receiptsSent: simStats.counters.receiptsSent,
      reports: receiver.events,
      submitRepeats: repeats.repeated,
      reportsPerS: rate(receiver.events, ms(lastEventAt)),
      recipientsPerSEndToEnd: rate(n, ms(lastEventAt)),
      secondsUntil: {
        lastAccept: r1(ms(lastAcceptAt) / 1000),
        lastSubmit: r1(ms(simStats.lastSubmitAt) / 1000),
        lastEvent: r1(ms(lastEventAt) / 1000),
      },
      check,
      cpu,
      cpuUsPerRecipient: costPer(cpu, n),
      writeSyscallsPerRecipient: writesPer(cpu, n),
      rss,
    };
  } finally {
    await client?.close().catch(() => undefined);
    await receiver.close();
    for (const b of boxes.reverse()) await stopChild(b, 5000);
    for (const u of unregister) u();
    await sim.stop();
    await storage?.cleanup().catch(() => undefined);
  }
}
