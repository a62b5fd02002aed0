/** Command line of `npm run bench` (scripts/bench/run.ts). */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { hasCopies, parseCopies, type CopiesSpec } from './copies.js';

export const SCENARIOS = ['accept', 'e2e-smpp', 'e2e-kannel', 'e2e-smpp-capped', 'priority-under-load', 'e2e-whatsapp', 'webhooks', 'verify', 'e2e-viber'] as const;
export const SMSC_IDS = ['hex', 'dec', 'string'] as const;
export type SmscIds = (typeof SMSC_IDS)[number];
export type ScenarioName = (typeof SCENARIOS)[number];

export interface Options {
  quick: boolean;
  scenarios: ScenarioName[];
  /** e2e-smpp: recipients through the whole pipeline. */
  recipients: number;
  /** e2e-smpp: recipients sent through the whole path and waited for before the measured run (not counted). */
  warmup: number;
  /** accept: at most this many recipients, for at most `acceptSeconds` (after warm-up). */
  acceptRecipients: number;
  acceptSeconds: number;
  /** accept: `web` (the API alone, default) or `all` (workers digest the load meanwhile). */
  acceptRole: 'web' | 'all';
  /** HTTP requests in flight (keep-alive connections) for accept and e2e. */
  concurrency: number;
  /** HTTP requests in flight for the accept scenario. */
  acceptConcurrency: number;
  /** priority-under-load: priority messages, one every `priorityIntervalMs`. */
  priority: number;
  priorityIntervalMs: number;
  /** webhooks: events per phase, receivers of the second phase, delay of the slow one. */
  webhookEvents: number;
  receivers: number;
  slowMs: number;
  verifyStarts: number;
  verifySeconds: number;
  /** `auto`: SMPP when shared/carriers/smpp/carrier.ts exists, else the sandbox carrier. */
  carrier: 'auto' | 'smpp' | 'sandbox';
  /** Query of SMPP_URL (window, tps, …): by default a throughput cap that never binds and `auto` id forms. */
  smppParams: string;
  /** The message ids the simulator issues (and writes the same way in its receipts); default decimal. */
  smscIds: SmscIds;
  /** e2e-kannel: delivery reports to the receiver (`all`, the service's workload), only final ones, or none (submits only). */
  kannelReports: 'all' | 'final' | 'none';
  /** e2e-kannel: where Kannel keeps its delivery-report map and its message store (see kannel.ts, `STORAGES`). */
  kannelStorage: 'memory' | 'redis' | 'pgsql';
  /** e2e-smpp-capped: the `tps` it sets in SMPP_URL (a cap below what the machine reaches). */
  capTps: number;
  /** e2e-smpp-capped: recipients (`recipients`, at most `capTps` × 20 s; quick × 4 s). */
  cappedRecipients: number;
  /** Copies of each role (`--copies`); the same for every scenario's service. */
  copies: CopiesSpec;
  /** e2e-smpp: SIGKILL one copy of each worker role mid-run, restarted after `restartPauseMs`. */
  killOne: boolean;
  restartPauseMs: number;
  /** e2e-smpp with --copies or --kill-one: run it with one copy of each role first, to compare. */
  baseline: boolean;
  receiptDelayMs: number;
  cpuProf: boolean;
  /** Sample pg_stat_activity while measuring (on with --cpu-prof). */
  pgActivity: boolean;
  ownRedis: boolean;
  /**
   * `procfile`: web + the Procfile's workers, started by the harness; `start`: `switchboard start`
   * (what npm start runs: a supervisor starting the same roles); `all`: one in-process `switchboard
   * all`; `split`: `web` + `worker`.
   */
  processes: 'all' | 'split' | 'procfile' | 'start';
  /** Extra service environment (KEY=VALUE), e.g. SMS_CONCURRENCY=16. */
  env: Record<string, string>;
  /** SQL run on each fresh database after the service migrated it (to measure a schema idea). */
  setupSql: string[];
  build: boolean;
  keep: boolean;
  out: string | null;
  pgUrl: string;
  redisUrl: string;
  /** Upper bound of the whole run. */
  maxMinutes: number;
  /** Before each scenario wait up to this many seconds for the machine to be quiet (< 0.3 cores busy). */
  waitQuietS: number;
}

const USAGE = `usage: node --import tsx scripts/bench/run.ts [options]
  --quick                  ~20 s smoke run (small counts)
  --scenario NAME          accept | e2e-smpp | e2e-kannel | e2e-smpp-capped | priority-under-load | e2e-whatsapp |
                           webhooks | verify | e2e-viber (repeat or comma-separate; default all). e2e-kannel runs
                           e2e-smpp's workload through Kannel (Debian's kannel package; skipped without it), the
                           reference of issue 23's target, in the same run and phase of the machine
  --recipients N           e2e-smpp, e2e-kannel, e2e-whatsapp and e2e-viber recipients (default 100000; quick 1000)
  --warmup N               e2e-smpp: recipients sent through the same path first and waited for, not
                           measured (default 5000; quick 100; 0: measure from fresh processes)
  --accept-recipients N    accept: stop after N recipients (default 300000; quick 20000)
  --accept-seconds S       accept: stop after S seconds (default 20; quick 2)
  --accept-role web|all    accept against the API process alone (default) or the all-in-one process
  --concurrency N          HTTP requests in flight for e2e-smpp's backlog and verify (default 16)
  --accept-concurrency N   HTTP requests in flight for accept (default 4: at 8 the same throughput
                           costs more (parallel inserts contend for WAL locks) and p99 doubles)
  --priority N             priority messages during the backlog (default 200; quick 20)
  --webhook-events N       events per webhooks phase (default 50000; quick 2000)
  --receivers N            receivers of the second webhooks phase, one slow (default 50)
  --verify-starts N        validations to start (default 5000; quick 200)
  --carrier auto|smpp|sandbox   carrier of e2e-smpp/priority-under-load (default auto)
  --smpp-params Q          query of SMPP_URL (default "window=50&tps=100000": as operators run it, a
                           throughput cap that never binds here and the default id forms, auto, learned
                           per connection; "window=50&submit_id=hex&receipt_id=hex" with --smsc-ids hex
                           is the explicit configuration of the rounds before issue 23)
  --smsc-ids dec|hex|string   ids the simulator issues, receipts naming them the same way: decimal
                           (1, 2, 3, ..., the default), hex (0000001A) or opaque UUID-like strings
  --kannel-reports all|final|none   e2e-kannel: a dlr-url GET per delivery report (SMSC accepted, then delivered
                           or undelivered: e2e-smpp's workload, the default), per final report only (delivered or
                           undelivered), or none (it ends at the last submit_sm); the last two are cheaper for
                           Kannel and not the same workload
  --kannel-storage memory|redis|pgsql   e2e-kannel: where Kannel keeps its delivery-report map and its
                           message store: in memory (Kannel's defaults, dlr-storage internal and no store; the
                           default), in Redis (dlr-storage redis, store-type redis), or the reports in Postgres
                           (dlr-storage pgsql, indexed on smsc and ts) with the message store in a spool
                           directory: the durable configurations operators run at volume
  --cap-tps N              e2e-smpp-capped: the tps it sets in SMPP_URL (default 2000; quick 250), a
                           cap that binds; it sends min(--recipients, N x 20 s) recipients (quick N x 4 s)
                           and reports the submit rate measured at the simulator against the cap
  --copies N | ROLE=N      run N copies of each role (web and every Procfile worker), or of one role
                           (repeat or comma-separate: --copies 2,web=1); the load spreads over the web
                           copies; e2e-smpp then first runs with one copy of each role (see --no-baseline)
                           and reports the throughput against it. Every e2e-smpp run checks that no
                           recipient was submitted twice and no attempt charged twice
  --kill-one               e2e-smpp: once a third of the expected webhook events arrived, SIGKILL the
                           first copy of each worker role, restart it after 2 s (as a supervisor does)
                           and check the same (repeats within SMPP's at-least-once bound are reported);
                           e2e-whatsapp and e2e-viber: their run is itself the kill run, checked the same
                           way, plus a ttl timer for every attempt still waiting (and Meta's sends per
                           number for WhatsApp)
  --no-baseline            with --copies / --kill-one, do not run e2e-smpp with one copy first
  --receipt-delay MS       simulator receipt delay (default 50; e2e-viber: its first callback)
  --processes procfile|start|all|split   the Procfile's processes, as docker-compose runs them (default: its
                           release step, then web and its workers with their --pools/--lanes), "switchboard
                           start" (what npm start runs: a supervisor that migrates and starts the same roles
                           as its children), one in-process "switchboard all", or "web" + one "worker"
  --env KEY=VALUE          extra service environment (repeatable)
  --setup-sql SQL          run SQL on each fresh database once the service migrated it (repeatable),
                           e.g. --setup-sql "CREATE INDEX ON carrier_refs (attempt_id)" to measure an idea;
                           it runs once the service answers, so a session setting (ALTER DATABASE … SET)
                           reaches only connections opened after it: for those use --env PGOPTIONS=…
  --cpu-prof               run the service under node --cpu-prof and summarise the profiles (implies --pg-activity)
  --pg-activity            sample pg_stat_activity every 20 ms: which statements and waits the database spends its time on
  --own-redis              start a private redis-server instead of using REDIS_URL with a fresh prefix
  --no-build               do not run "npm run build" first (use the existing dist/)
  --keep                   keep the benchmark databases (for inspection)
  --out FILE               also write every result as JSON to FILE
  --max-minutes M          abort the run after M minutes (default 28)
  --wait-quiet S           before each scenario wait up to S s for other load on the machine to stop (default 0)
Environment: BENCH_DATABASE_URL (admin connection, default postgres://root@127.0.0.1:5432/postgres),
             BENCH_REDIS_URL (default redis://127.0.0.1:6379).`;

/**
 * SMPP_URL's query unless --smpp-params: what an operator runs (issue 23), a throughput cap (every
 * SMSC contract has one) that never binds on this machine, and the default id forms (`auto`).
 */
export const DEFAULT_SMPP_PARAMS = 'window=50&tps=100000';

function positiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) {
    return fallback;
  }
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) {
    throw new Error(`--${name} must be a positive integer (got "${value}")`);
  }
  return n;
}

function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined) {
    return fallback;
  }
  if (!allowed.includes(value as T)) {
    throw new Error(`--${name} must be one of ${allowed.join(', ')} (got "${value}")`);
  }
  return value as T;
}

export function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      scenario: { type: 'string', multiple: true },
      recipients: { type: 'string' },
      warmup: { type: 'string' },
      'accept-recipients': { type: 'string' },
      'accept-seconds': { type: 'string' },
      'accept-role': { type: 'string' },
      concurrency: { type: 'string' },
      'accept-concurrency': { type: 'string' },
      priority: { type: 'string' },
      'priority-interval': { type: 'string' },
      'webhook-events': { type: 'string' },
      receivers: { type: 'string' },
      'slow-ms': { type: 'string' },
      'verify-starts': { type: 'string' },
      'verify-seconds': { type: 'string' },
      carrier: { type: 'string' },
      'smpp-params': { type: 'string' },
      'smsc-ids': { type: 'string' },
      'cap-tps': { type: 'string' },
      'kannel-reports': { type: 'string' },
      'kannel-storage': { type: 'string' },
      copies: { type: 'string', multiple: true },
      'kill-one': { type: 'boolean', default: false },
      'no-baseline': { type: 'boolean', default: false },
      'receipt-delay': { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      'pg-activity': { type: 'boolean', default: false },
      'own-redis': { type: 'boolean', default: false },
      processes: { type: 'string' },
      env: { type: 'string', multiple: true },
      'setup-sql': { type: 'string', multiple: true },
      'no-build': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      out: { type: 'string' },
      'max-minutes': { type: 'string' },
      'wait-quiet': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick === true;
  const scenarios = (values.scenario ?? []).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
  for (const s of scenarios) {
    if (!SCENARIOS.includes(s as ScenarioName)) {
      throw new Error(`unknown scenario "${s}" (known: ${SCENARIOS.join(', ')})`);
    }
  }
  const env: Record<string, string> = {};
  for (const pair of values.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq < 1) {
      throw new Error(`--env wants KEY=VALUE (got "${pair}")`);
    }
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const recipients = positiveInt('recipients', values.recipients, quick ? 1000 : 100_000);
  if (recipients > 1_000_000) {
    throw new Error('--recipients is bounded to 1,000,000');
  }
  const warmup = values.warmup === undefined ? (quick ? 100 : 5000) : Number(values.warmup);
  if (!Number.isInteger(warmup) || warmup < 0 || warmup > 100_000) {
    throw new Error('--warmup must be an integer from 0 to 100,000');
  }
  const receiptDelay = values['receipt-delay'] === undefined ? 50 : Number(values['receipt-delay']);
  if (!Number.isInteger(receiptDelay) || receiptDelay < 0) {
    throw new Error('--receipt-delay must be an integer >= 0');
  }
  const smscIds = oneOf('smsc-ids', values['smsc-ids'], SMSC_IDS, 'dec');
  const capTps = positiveInt('cap-tps', values['cap-tps'], quick ? 250 : 2000);
  if (capTps > 100_000) {
    throw new Error('--cap-tps is bounded to 100,000 (the largest tps SMPP_URL takes)');
  }
  const copies = parseCopies(values.copies ?? []);
  const killOne = values['kill-one'] === true;
  const processes = oneOf('processes', values.processes, ['all', 'split', 'procfile', 'start'] as const, 'procfile');
  if ((hasCopies(copies) || killOne) && (processes === 'all' || processes === 'start')) {
    throw new Error('--copies and --kill-one need the roles in processes of their own (--processes procfile or split)');
  }
  return {
    quick,
    scenarios: scenarios.length ? [...new Set(scenarios as ScenarioName[])] : [...SCENARIOS],
    recipients,
    warmup,
    acceptRecipients: positiveInt('accept-recipients', values['accept-recipients'], quick ? 20_000 : 300_000),
    acceptSeconds: positiveInt('accept-seconds', values['accept-seconds'], quick ? 2 : 20),
    acceptRole: oneOf('accept-role', values['accept-role'], ['web', 'all'] as const, 'web'),
    concurrency: positiveInt('concurrency', values.concurrency, 16),
    acceptConcurrency: positiveInt('accept-concurrency', values['accept-concurrency'], 4),
    priority: Math.min(10_000, positiveInt('priority', values.priority, quick ? 20 : 200)),
    priorityIntervalMs: positiveInt('priority-interval', values['priority-interval'], quick ? 25 : 50),
    webhookEvents: Math.min(1_000_000, positiveInt('webhook-events', values['webhook-events'], quick ? 2000 : 50_000)),
    receivers: Math.min(200, Math.max(2, positiveInt('receivers', values.receivers, 50))),
    slowMs: positiveInt('slow-ms', values['slow-ms'], 1000),
    verifyStarts: Math.min(1_000_000, positiveInt('verify-starts', values['verify-starts'], quick ? 200 : 5000)),
    verifySeconds: positiveInt('verify-seconds', values['verify-seconds'], quick ? 2 : 15),
    carrier: oneOf('carrier', values.carrier, ['auto', 'smpp', 'sandbox'] as const, 'auto'),
    smppParams: values['smpp-params'] ?? DEFAULT_SMPP_PARAMS,
    smscIds,
    kannelReports: oneOf('kannel-reports', values['kannel-reports'], ['all', 'final', 'none'] as const, 'all'),
    kannelStorage: oneOf('kannel-storage', values['kannel-storage'], ['memory', 'redis', 'pgsql'] as const, 'memory'),
    capTps,
    cappedRecipients: Math.min(recipients, capTps * (quick ? 4 : 20)),
    copies,
    killOne,
    restartPauseMs: 2000,
    baseline: values['no-baseline'] !== true,
    receiptDelayMs: receiptDelay,
    cpuProf: values['cpu-prof'] === true,
    pgActivity: values['pg-activity'] === true || values['cpu-prof'] === true,
    ownRedis: values['own-redis'] === true,
    processes,
    env,
    setupSql: values['setup-sql'] ?? [],
    build: values['no-build'] !== true,
    keep: values.keep === true,
    out: values.out ? path.resolve(values.out) : null,
    pgUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres',
    redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
    maxMinutes: positiveInt('max-minutes', values['max-minutes'], 28),
    waitQuietS: values['wait-quiet'] === undefined ? 0 : positiveInt('wait-quiet', values['wait-quiet'], 0),
  };
}

/** Which carrier e2e-smpp uses: SMPP once the SMPP carrier exists in the sources. */
export function resolveCarrier(opts: Options, root: string): 'smpp' | 'sandbox' {
  if (opts.carrier !== 'auto') {
    return opts.carrier;
  }
  return existsSync(path.join(root, 'shared/carriers/smpp/carrier.ts')) ? 'smpp' : 'sandbox';
}

export { USAGE };
