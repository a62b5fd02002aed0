/**
 * CPU and memory accounting of one scenario. CPU seconds are read from /proc (utime + stime, all
 * threads) for the service process(es) and the SMSC simulator, for the Postgres backends of the
 * benchmark's database (sampled every 500 ms, because backends come and go), for the Postgres
 * cluster's shared processes, and from Redis' INFO. The harness reports its own CPU (load
 * generator + webhook receiver) and what the rest of the machine used meanwhile (noise).
 */
import pg from 'pg';
import { Redis } from 'ioredis';
import { machineCpuSeconds, postgresProcesses, processCpuSeconds, processRssBytes, processSyscalls, type PgKind } from './procs.js';

export interface CpuReport {
  seconds: number;
  /** Postgres work of the database (pg_stat_database deltas) and Redis commands (whole server). */
  work: Record<string, number>;
  /** write(2)-family system calls per group (a proxy for round trips: every query, command, PDU, response). */
  writeSyscalls: Record<string, number>;
  /** CPU seconds per group. */
  cpuS: Record<string, number>;
  /** Share of one core per group (cpu seconds / wall seconds). */
  cores: Record<string, number>;
}

export interface RssSeries {
  name: string;
  samples: Array<[number, number]>; // [ms since start, bytes]
}

export interface RssSummary {
  name: string;
  firstQuarterMiB: number;
  lastQuarterMiB: number;
  /** last / first quarter mean. */
  ratio: number;
  maxMiB: number;
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

async function redisCpuSeconds(redis: Redis): Promise<number | null> {
  try {
    const info = await redis.info('cpu');
    const user = /used_cpu_user:([\d.]+)/.exec(info);
    const sys = /used_cpu_sys:([\d.]+)/.exec(info);
    return user && sys ? Number(user[1]) + Number(sys[1]) : null;
  } catch {
    return null;
  }
}

interface Snapshot {
  at: number;
  procs: Map<string, number>; // group -> cpu seconds
  writes: Map<string, number>; // group -> write syscalls
  redis: number | null;
  machine: number;
  harness: number;
}

/**
 * Measures one interval: `start()` … `stop()`. Processes are named groups of pids (`service`,
 * `simulator`); Postgres is found by database name.
 */
export class Meter {
  /** How long stop() waits for Postgres to publish its statistics (0: take what is there; --quick). */
  static workSettleMs = 1200;

  private startSnap: Snapshot | null = null;
  private startWork: Record<string, number> = {};
  private readonly pgBaseline = new Map<number, { kind: PgKind; cpu: number; w: number }>();
  private readonly pgLast = new Map<number, { kind: PgKind; cpu: number; w: number }>();
  private timer: NodeJS.Timeout | null = null;
  private readonly rss = new Map<string, RssSeries>();
  private rssStartedAt = 0;
  /** The measured interval on CLOCK_MONOTONIC in µs (to cut CPU profiles to it). */
  readonly window = { fromUs: 0, toUs: 0 };
  private statsClient: pg.Client | null = null;

  /** Transactions and rows of the benchmark database, commands of Redis (cumulative counters). */
  private async work(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    try {
      const info = await this.redis.info('stats');
      out.redisCommands = Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
      // Per command (scripts' inner calls included): calls and server microseconds.
      const stats = await this.redis.info('commandstats');
      for (const m of stats.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) {
        out[`redis.calls.${m[1]}`] = Number(m[2]);
        out[`redis.usec.${m[1]}`] = Number(m[3]);
      }
    } catch {
      // leave it out
    }
    if (this.statsUrl && this.databases.size === 1) {
      try {
        if (!this.statsClient) {
          this.statsClient = new pg.Client({ connectionString: this.statsUrl });
          this.statsClient.on('error', () => undefined);
          await this.statsClient.connect();
        }
        // Statistics are flushed by backends at most once a second: ask for a fresh snapshot.
        await this.statsClient.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await this.statsClient.query<Record<string, string>>(
          `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_fetched, tup_returned
             FROM pg_stat_database WHERE datname = $1`, [[...this.databases][0]]);
        for (const [k, v] of Object.entries(rows[0] ?? {})) {
          out[`pg_${k}`] = Number(v);
        }
        // Checkpoints the WAL volume forced (max_wal_size reached): after each one every page
        // written again goes to the WAL whole, which makes the same work cost more.
        const { rows: bg } = await this.statsClient.query<Record<string, string>>(
          'SELECT checkpoints_req, checkpoints_timed, pg_current_wal_lsn() - \'0/0\'::pg_lsn AS wal_bytes FROM pg_stat_bgwriter');
        out.pg_checkpoints_req = Number(bg[0]?.checkpoints_req ?? 0);
        out.pg_checkpoints_timed = Number(bg[0]?.checkpoints_timed ?? 0);
        out.pg_wal_bytes = Number(bg[0]?.wal_bytes ?? 0);
      } catch {
        // leave it out
      }
    }
    return out;
  }

  /** Last CPU seen per group pid (a process that exits keeps its last reading). */
  private readonly lastKnown = new Map<number, number>();
  private readonly lastWrites = new Map<number, number>();

  constructor(
    private readonly groups: Record<string, number[]>,
    private readonly databases: Set<string>,
    private readonly redis: Redis,
    private readonly rssPids: Record<string, number> = {},
    /** Connection URL of the benchmark database (pg_stat_database); optional. */
    private readonly statsUrl: string | null = null,
  ) {}

  private async snapshot(): Promise<Snapshot> {
    const procs = new Map<string, number>();
    const writes = new Map<string, number>();
    for (const [group, pids] of Object.entries(this.groups)) {
      let sum = 0;
      let w = 0;
      for (const pid of pids) {
        sum += processCpuSeconds(pid) ?? this.lastKnown.get(pid) ?? 0;
        w += processSyscalls(pid)?.w ?? this.lastWrites.get(pid) ?? 0;
      }
      procs.set(group, sum);
      writes.set(group, w);
    }
    const usage = process.cpuUsage();
    return {
      at: performance.now(),
      procs,
      writes,
      redis: await redisCpuSeconds(this.redis),
      machine: machineCpuSeconds().busy,
      harness: (usage.user + usage.system) / 1e6,
    };
  }

  private sample(): void {
    for (const pids of Object.values(this.groups)) {
      for (const pid of pids) {
        const cpu = processCpuSeconds(pid);
        if (cpu !== null) {
          this.lastKnown.set(pid, cpu);
        }
        const io = processSyscalls(pid);
        if (io !== null) {
          this.lastWrites.set(pid, io.w);
        }
      }
    }
    for (const p of postgresProcesses(this.databases)) {
      this.pgLast.set(p.pid, { kind: p.kind, cpu: p.cpu, w: p.w });
    }
    const t = performance.now() - this.rssStartedAt;
    for (const [name, pid] of Object.entries(this.rssPids)) {
      const bytes = processRssBytes(pid);
      if (bytes !== null) {
        let series = this.rss.get(name);
        if (!series) {
          series = { name, samples: [] };
          this.rss.set(name, series);
        }
        series.samples.push([t, bytes]);
      }
    }
  }

  async start(): Promise<void> {
    this.pgBaseline.clear();
    this.pgLast.clear();
    this.rss.clear();
    for (const p of postgresProcesses(this.databases)) {
      this.pgBaseline.set(p.pid, { kind: p.kind, cpu: p.cpu, w: p.w });
      this.pgLast.set(p.pid, { kind: p.kind, cpu: p.cpu, w: p.w });
    }
    this.rssStartedAt = performance.now();
    this.startWork = await this.work();
    this.window.fromUs = Number(process.hrtime.bigint() / 1000n);
    this.startSnap = await this.snapshot();
    this.sample();
    this.timer = setInterval(() => this.sample(), 250);
    this.timer.unref();
  }

  async stop(): Promise<CpuReport> {
    if (!this.startSnap) {
      throw new Error('meter not started');
    }
    if (this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
    this.sample();
    this.window.toUs = Number(process.hrtime.bigint() / 1000n);
    const end = await this.snapshot();
    const start = this.startSnap;
    const seconds = (end.at - start.at) / 1000;
    const cpuS: Record<string, number> = {};
    for (const [group, cpu] of end.procs) {
      cpuS[group] = Math.max(0, cpu - (start.procs.get(group) ?? 0));
    }
    const serviceGroups = Object.keys(cpuS).filter((k) => k.startsWith('service.'));
    if (serviceGroups.length > 0) {
      // Split process model: `service` is the sum, `service.web` / `service.worker` the parts.
      const parts = serviceGroups.reduce((a, k) => a + cpuS[k]!, 0);
      cpuS.service = parts;
    }
    const pg: Record<PgKind, number> = { bench: 0, shared: 0, other: 0 };
    let pgWrites = 0;
    for (const [pid, last] of this.pgLast) {
      const base = this.pgBaseline.get(pid);
      pg[last.kind] += Math.max(0, last.cpu - (base?.cpu ?? 0));
      if (last.kind === 'bench') {
        pgWrites += Math.max(0, last.w - (base?.w ?? 0));
      }
    }
    const writeSyscalls: Record<string, number> = {};
    for (const [group, w] of end.writes) {
      writeSyscalls[group] = Math.max(0, w - (start.writes.get(group) ?? 0));
    }
    writeSyscalls.postgres = pgWrites;
    cpuS.postgres = pg.bench;
    // The cluster's shared processes (WAL writer, checkpointer, …) work for every database: the
    // bench is charged the share its backends had of all backends' CPU.
    cpuS.postgresShared = pg.bench + pg.other > 0 ? (pg.shared * pg.bench) / (pg.bench + pg.other) : pg.shared;
    cpuS.postgresSharedAll = pg.shared;
    cpuS.redis = end.redis !== null && start.redis !== null ? Math.max(0, end.redis - start.redis) : 0;
    cpuS.harness = end.harness - start.harness;
    const ours = Object.entries(cpuS).filter(([k]) => !k.startsWith('service.') && k !== 'postgresSharedAll').reduce((a, [, b]) => a + b, 0);
    cpuS.otherOnMachine = Math.max(0, end.machine - start.machine - ours);
    cpuS.otherPostgresDatabases = pg.other;
    const cores: Record<string, number> = {};
    for (const [k, v] of Object.entries(cpuS)) {
      cpuS[k] = round(v, 3);
      cores[k] = seconds > 0 ? round(v / seconds, 3) : 0;
    }
    // Backends publish their statistics about once a second once idle.
    if (Meter.workSettleMs > 0) {
      await new Promise((r) => setTimeout(r, Meter.workSettleMs));
    }
    const endWork = await this.work();
    const work: Record<string, number> = {};
    for (const [k, v] of Object.entries(endWork)) {
      work[k] = v - (this.startWork[k] ?? 0);
    }
    await this.statsClient?.end().catch(() => undefined);
    this.statsClient = null;
    return { seconds: round(seconds, 3), work, writeSyscalls, cpuS, cores };
  }

  /** RSS first-quarter vs last-quarter means over [fromMs, toMs] (relative to start()). */
  rssSummary(fromMs = 0, toMs = Number.POSITIVE_INFINITY): RssSummary[] {
    const out: RssSummary[] = [];
    for (const series of this.rss.values()) {
      const within = series.samples.filter(([t]) => t >= fromMs && t <= toMs);
      if (within.length < 4) {
        continue;
      }
      const t0 = within[0]![0];
      const t1 = within[within.length - 1]![0];
      const span = t1 - t0;
      const mean = (xs: Array<[number, number]>) => xs.reduce((a, [, b]) => a + b, 0) / Math.max(1, xs.length);
      const first = within.filter(([t]) => t <= t0 + span / 4);
      const last = within.filter(([t]) => t >= t1 - span / 4);
      const mib = (b: number) => round(b / 1048576, 1);
      const f = mean(first);
      const l = mean(last);
      out.push({
        name: series.name,
        firstQuarterMiB: mib(f),
        lastQuarterMiB: mib(l),
        ratio: round(l / f, 3),
        maxMiB: mib(Math.max(...within.map(([, b]) => b))),
      });
    }
    return out;
  }

  rssSeries(): RssSeries[] {
    return [...this.rss.values()];
  }
}

/** Transactions, rows and Redis commands per unit of work. */
export function workPer(cpu: CpuReport, units: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const per = (v: number) => (units > 0 ? Math.round((v / units) * 100) / 100 : 0);
  const commands: Array<{ command: string; calls: number; usec: number }> = [];
  for (const [k, v] of Object.entries(cpu.work)) {
    if (k.startsWith('redis.calls.')) {
      const command = k.slice('redis.calls.'.length);
      commands.push({ command, calls: per(v), usec: per(cpu.work[`redis.usec.${command}`] ?? 0) });
    } else if (k.startsWith('pg_checkpoints_')) {
      out[`${k.replace(/^pg_/, '')}DuringRun`] = v; // counts, not per unit
    } else if (!k.startsWith('redis.usec.')) {
      out[k.replace(/^pg_/, '')] = per(v);
    }
  }
  // The Redis commands that cost the server most per unit (calls and microseconds per unit).
  out.redisTop = commands.filter((c) => c.calls > 0).sort((a, b) => b.usec - a.usec).slice(0, 10);
  return out;
}

/** write system calls per unit of work per group (service, postgres backends, simulator). */
export function writesPer(cpu: CpuReport, units: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(cpu.writeSyscalls)) {
    out[k] = units > 0 ? Math.round((v / units) * 10) / 10 : 0;
  }
  return out;
}

/** CPU microseconds per unit of work (recipient, event) for the groups that make up the service's cost. */
export function costPer(cpu: CpuReport, units: number): Record<string, number> {
  const g = cpu.cpuS;
  const service = g.service ?? 0;
  const pg = (g.postgres ?? 0) + (g.postgresShared ?? 0);
  const redis = g.redis ?? 0;
  const per = (s: number) => (units > 0 ? Math.round((s * 1e6) / units) : 0);
  return {
    service: per(service),
    postgres: per(pg),
    redis: per(redis),
    total: per(service + pg + redis),
    simulator: per(g.simulator ?? 0),
    harness: per(g.harness ?? 0),
  };
}

export interface PgActivityRow {
  what: string;
  /** Share of all samples of this database's backends. */
  pct: number;
}

export interface PgActivity {
  samples: number;
  /** Mean number of backends of the database active (running a statement) per sample. */
  meanActive: number;
  /** Mean number of backends idle inside a transaction (waiting for the service's next statement). */
  meanIdleInTransaction: number;
  top: PgActivityRow[];
}

/**
 * A poor man's statement profiler (pg_stat_statements needs a server restart): samples
 * pg_stat_activity of the benchmark database every `intervalMs` and counts, per statement
 * (its first 90 characters) and wait event, how often a backend was busy with it.
 */
export class PgActivitySampler {
  private client: pg.Client | null = null;
  private readonly counts = new Map<string, number>();
  private samples = 0;
  private active = 0;
  private idleInTx = 0;
  private running = false;
  private loop: Promise<void> | null = null;

  constructor(
    private readonly url: string,
    private readonly database: string,
    private readonly intervalMs = 20,
  ) {}

  async start(): Promise<void> {
    this.client = new pg.Client({ connectionString: this.url });
    this.client.on('error', () => undefined);
    await this.client.connect();
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        try {
          const { rows } = await this.client!.query<{ state: string; wait: string | null; query: string }>(
            `SELECT state, CASE WHEN wait_event IS NULL THEN NULL ELSE wait_event_type || ':' || wait_event END AS wait, query
               FROM pg_stat_activity
              WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                AND state IN ('active', 'idle in transaction')`,
            [this.database],
          );
          this.samples++;
          for (const row of rows) {
            if (row.state === 'idle in transaction') {
              this.idleInTx++;
              this.bump('(idle in transaction: waiting for the service)');
              continue;
            }
            this.active++;
            const text = row.query.replace(/\s+/g, ' ').trim().slice(0, 90);
            this.bump(`${row.wait ? `[${row.wait}] ` : ''}${text}`);
          }
        } catch {
          // the database went away: stop quietly
          this.running = false;
        }
        await new Promise((r) => setTimeout(r, this.intervalMs));
      }
    })();
  }

  private bump(key: string): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  async stop(topN = 20): Promise<PgActivity> {
    this.running = false;
    await this.loop;
    await this.client?.end().catch(() => undefined);
    this.client = null;
    const all = [...this.counts.values()].reduce((a, b) => a + b, 0);
    return {
      samples: this.samples,
      meanActive: round(this.active / Math.max(1, this.samples), 2),
      meanIdleInTransaction: round(this.idleInTx / Math.max(1, this.samples), 2),
      top: [...this.counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, topN)
        .map(([what, n]) => ({ what, pct: round((n * 100) / Math.max(1, all), 1) })),
    };
  }
}
