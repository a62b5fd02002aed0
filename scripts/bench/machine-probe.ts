/**
 * How fast the machine is at this moment, by fixed work none of the service's code takes part in,
 * so that figures measured on different days can be told apart from the machine's own drift (this
 * VM's speed moves by a factor of two between hours: docs/benchmarks.md, "The machine's phase").
 * The harness runs it before each scenario and prints it beside the figures.
 *
 * Four measurements, each the median of a few repetitions:
 * - `jsMs`: a fixed piece of JavaScript (objects built, serialised, parsed, looked up): the CPU.
 * - `pageUs`: the first write to each 4 KiB page of 64 MiB just taken from the system: what a page
 *   fault costs (V8's heap and Postgres' memory grow this way; on a VM it can cost 10× a native one).
 * - `pgRoundTripUs`: `SELECT 1` over one connection: a round trip to Postgres, two processes woken.
 * - `pgCommitUs`: a transaction that takes an id and commits (`SELECT pg_current_xact_id()`): a
 *   commit record written and flushed, as every write of the service waits for.
 *
 * As a child process (the harness's heap and sockets stay out of it):
 *   node --expose-gc --import tsx scripts/bench/machine-probe.ts <postgres url>
 * prints one JSON line.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export interface MachineProbe {
  jsMs: number;
  pageUs: number;
  pgRoundTripUs: number;
  pgCommitUs: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const elapsedMs = (t: bigint): number => Number(process.hrtime.bigint() - t) / 1e6;

function jsWork(): number {
  const t = process.hrtime.bigint();
  const byId = new Map<number, { id: number; phone: string; body: string; parts: number }>();
  let sum = 0;
  for (let round = 0; round < 4; round++) {
    const rows = [];
    for (let i = 0; i < 20_000; i++) {
      rows.push({ id: i, phone: `+4207${String(10_000_000 + i)}`, body: `Your code is ${i % 10_000}. Round ${round}.`, parts: 1 + (i % 3) });
    }
    const parsed = JSON.parse(JSON.stringify(rows)) as typeof rows;
    for (const r of parsed) byId.set(r.id, r);
    for (let i = 0; i < 20_000; i += 7) sum += byId.get(i)!.parts;
  }
  if (sum <= 0) throw new Error('unreachable');
  return elapsedMs(t);
}

const PAGE = 4096;
const PAGES_BYTES = 64 * 1024 * 1024;

function pageWork(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.(); // the previous round's buffer goes back to the system first
  const b = Buffer.allocUnsafeSlow(PAGES_BYTES); // above malloc's mmap threshold: pages the process never had
  const t = process.hrtime.bigint();
  for (let i = 0; i < PAGES_BYTES; i += PAGE) b[i] = 1;
  return (elapsedMs(t) * 1000) / (PAGES_BYTES / PAGE);
}

async function pgWork(url: string): Promise<{ roundTripUs: number; commitUs: number }> {
  const client = new pg.Client({ connectionString: url, application_name: 'switchboard-bench-probe' });
  await client.connect();
  try {
    await client.query('SELECT 1');
    const trips: number[] = [];
    for (let round = 0; round < 5; round++) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < 300; i++) await client.query('SELECT 1');
      trips.push((elapsedMs(t) * 1000) / 300);
    }
    const commits: number[] = [];
    for (let round = 0; round < 5; round++) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < 40; i++) await client.query('SELECT pg_current_xact_id()');
      commits.push((elapsedMs(t) * 1000) / 40);
    }
    return { roundTripUs: median(trips), commitUs: median(commits) };
  } finally {
    await client.end();
  }
}

export async function measure(url: string): Promise<MachineProbe> {
  jsWork(); // compiled and warm before it is timed
  const js = [jsWork(), jsWork(), jsWork()];
  const pages = [pageWork(), pageWork(), pageWork()];
  const db = await pgWork(url);
  const round = (x: number, digits: number) => Number(x.toFixed(digits));
  return { jsMs: round(median(js), 1), pageUs: round(median(pages), 2), pgRoundTripUs: round(db.roundTripUs, 1), pgCommitUs: round(db.commitUs, 0) };
}

/** Runs the probe in a child process; null (and the reason, through `log`) when it fails. */
export function probeMachine(databaseUrl: string, log: (line: string) => void): Promise<MachineProbe | null> {
  const self = fileURLToPath(import.meta.url);
  const root = path.resolve(path.dirname(self), '..', '..');
  return new Promise((resolve) => {
    execFile(process.execPath, ['--expose-gc', '--import', 'tsx', self, databaseUrl], { cwd: root, timeout: 60_000 }, (err, stdout, stderr) => {
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (err || !line) {
        log(`machine probe failed: ${err ? err.message : 'no result'} ${stderr.slice(-500)}`);
        resolve(null);
        return;
      }
      resolve(JSON.parse(line) as MachineProbe);
    });
  });
}

/** One line for the report: `JS 310 ms · page 4.1 µs · pg 45 µs · commit 1,210 µs`. */
export function describeProbe(p: MachineProbe | null | undefined): string {
  return p ? `JS ${p.jsMs} ms · page ${p.pageUs} µs · pg ${p.pgRoundTripUs} µs · commit ${p.pgCommitUs.toLocaleString('en-US')} µs` : '-';
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const url = process.argv[2] ?? 'postgres://root@127.0.0.1:5432/postgres';
  measure(url).then((p) => {
    process.stdout.write(`${JSON.stringify(p)}\n`);
  }, (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
