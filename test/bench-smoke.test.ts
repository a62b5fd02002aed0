/**
 * The benchmark harness still works: `scripts/bench/run.ts --quick` for one short scenario
 * (e2e-smpp with a few hundred recipients) builds, starts the compiled service, the simulator and
 * the webhook receiver, prints its JSON (with the machine probe taken before it), and every
 * recipient got exactly its expected events.
 * No timing is asserted (issue 9: "no test asserts a time"). Then e2e-kannel, the same workload
 * through Kannel (issue 23's reference): every report arrives, no number is submitted twice.
 * Kannel must be installed (Debian's `kannel`; .ci/run installs it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

type Result = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- the harness's JSON

/** Runs the harness with `args` (at most `killAfterMs`); its JSON results, stdout and stderr. */
async function runBench(args: string[], killAfterMs: number): Promise<{ results: Result[]; stdout: string; stderr: string; code: number | null }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (process.env.TEST_DATABASE_URL) {
    env.BENCH_DATABASE_URL = process.env.TEST_DATABASE_URL;
  }
  if (process.env.TEST_REDIS_URL) {
    env.BENCH_REDIS_URL = process.env.TEST_REDIS_URL;
  }
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/bench/run.ts', ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  // If this test is cut short, the harness gets Ctrl-C and stops what it started.
  const kill = setTimeout(() => child.kill('SIGINT'), killAfterMs);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(kill);
  const results = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Result);
  return { results, stdout, stderr, code };
}

test('npm run bench -- --quick produces its JSON and every expected event arrives', { timeout: 170_000 }, async () => {
  const { results, stdout, stderr, code } = await runBench(['--quick', '--scenario', 'e2e-smpp', '--recipients', '500', '--max-minutes', '3'], 160_000);
  const e2e = results.find((r) => r.scenario === 'e2e-smpp');
  assert.ok(e2e, `no e2e-smpp JSON on stdout (exit ${code}):\n${stdout}\n${stderr.slice(-3000)}`);
  assert.ok(e2e.check, `the e2e-smpp result has no event check: ${JSON.stringify(e2e)}`);
  const check = e2e.check as { recipients: number; ok: number; missingEvents: number; duplicateEvents: number; expectedEvents: number; receivedEvents: number; examples: string[] };
  const detail = `${JSON.stringify(check)}\nnotes: ${JSON.stringify(e2e.notes)}`;
  assert.equal(check.recipients, 500, detail);
  assert.equal(check.missingEvents, 0, detail);
  assert.equal(check.duplicateEvents, 0, detail);
  assert.equal(check.receivedEvents, check.expectedEvents, detail);
  assert.equal(check.ok, check.recipients, detail);
  assert.match(stdout, /\| e2e-smpp/, 'the summary table is printed');
  // The machine's speed before the scenario (scripts/bench/machine-probe.ts), measured, not left out.
  const probe = e2e.machineProbe as Record<string, unknown> | null;
  assert.ok(probe, `no machine probe in the result: ${stderr.slice(-2000)}`);
  for (const field of ['jsMs', 'pageUs', 'pgRoundTripUs', 'pgCommitUs']) {
    assert.ok(typeof probe[field] === 'number' && probe[field] > 0, `machineProbe.${field}: ${JSON.stringify(probe)}`);
  }
  assert.match(stdout, /JS [\d.]+ ms · page [\d.]+ µs · pg [\d.]+ µs · commit [\d,]+ µs/, 'the table shows the probe');
});

/** Redis keys and Postgres databases of run `id` that are still there. */
async function leftovers(id: string): Promise<{ redisKeys: string[]; databases: string[] }> {
  // The harness's own defaults (scripts/bench/options.ts), as runBench passes them.
  const redis = new Redis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');
  const db = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres' });
  try {
    const redisKeys = await redis.keys(`sb_bench_${id}_*`);
    await db.connect();
    const { rows } = await db.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`sb_bench_${id}_%`]);
    return { redisKeys, databases: rows.map((r) => r.datname) };
  } finally {
    redis.disconnect();
    await db.end();
  }
}

/** Kannel's storages (`--kannel-storage`), each with the report storage Kannel's status page must name. */
const STORAGE_CASES = [
  { storage: 'memory', recipients: 500, dlrStorage: 'internal' },
  { storage: 'redis', recipients: 200, dlrStorage: 'redis' },
  { storage: 'pgsql', recipients: 200, dlrStorage: 'pgsql' },
];

for (const { storage, recipients, dlrStorage } of STORAGE_CASES) {
  test(`e2e-kannel (storage ${storage}) runs the same workload through Kannel: every report arrives, no number is submitted twice`, { timeout: 120_000 }, async () => {
    assert.ok(existsSync('/usr/sbin/bearerbox') || existsSync('/usr/bin/bearerbox'),
      'Kannel is not installed: this test needs it (apt-get install -y kannel; .ci/run installs it)');
    // --no-build: the test above built dist/ (the simulator) a moment ago.
    const { results, stdout, stderr, code } = await runBench(
      ['--quick', '--no-build', '--scenario', 'e2e-kannel', '--kannel-storage', storage, '--recipients', String(recipients), '--max-minutes', '2'], 110_000);
    const kannel = results.find((r) => r.scenario === 'e2e-kannel');
    assert.ok(kannel, `no e2e-kannel JSON on stdout (exit ${code}):\n${stdout}\n${stderr.slice(-3000)}`);
    const detail = JSON.stringify({ notes: kannel.notes, check: kannel.check, statuses: kannel.acceptStatuses, config: kannel.kannel });
    assert.notEqual(kannel.skipped, true, detail);
    assert.equal(kannel.storage, storage, detail);
    assert.equal(kannel.check.recipients, recipients, detail);
    // 2 reports per recipient (SMSC accepted, then delivered or undelivered); 1 for the 2 % without a receipt.
    assert.equal(kannel.check.expectedEvents, recipients * 2 - recipients / 50, detail);
    assert.equal(kannel.check.receivedEvents, kannel.check.expectedEvents, detail);
    assert.equal(kannel.check.ok, recipients, detail);
    assert.equal(kannel.submits, recipients, detail);
    assert.equal(kannel.submitRepeats, 0, detail);
    assert.equal(kannel.ok, true, detail);
    assert.equal(kannel.dlrStorage, dlrStorage, `Kannel's status page names the report storage it used: ${detail}`);
    assert.match(stdout, /\| e2e-kannel \(Kannel/, 'the summary table names it');
    // What the run kept in Redis or Postgres is gone (the run's id ends the name of its log directory).
    const id = /logs and profiles in \S+-([0-9a-f]+)\s/.exec(stdout + stderr)?.[1];
    assert.ok(id, `the run's log directory is printed:\n${stderr.slice(0, 500)}`);
    assert.deepEqual(await leftovers(id), { redisKeys: [], databases: [] });
  });
}
