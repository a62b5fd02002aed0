/**
 * The benchmark harness still works: `scripts/bench/run.ts --quick` for one short scenario
 * (e2e-smpp with a few hundred recipients) builds, starts the compiled service, the simulator and
 * the webhook receiver, prints its JSON, and every recipient got exactly its expected events.
 * No timing is asserted (issue 9: "no test asserts a time").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

test('npm run bench -- --quick produces its JSON and every expected event arrives', { timeout: 170_000 }, async () => {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (process.env.TEST_DATABASE_URL) {
    env.BENCH_DATABASE_URL = process.env.TEST_DATABASE_URL;
  }
  if (process.env.TEST_REDIS_URL) {
    env.BENCH_REDIS_URL = process.env.TEST_REDIS_URL;
  }
  const child = spawn(process.execPath,
    ['--import', 'tsx', 'scripts/bench/run.ts', '--quick', '--scenario', 'e2e-smpp', '--recipients', '500', '--max-minutes', '3'],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  // If this test is cut short, the harness gets Ctrl-C and stops what it started.
  const kill = setTimeout(() => child.kill('SIGINT'), 160_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(kill);

  const results = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any
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
});
