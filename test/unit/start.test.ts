/**
 * `switchboard start`'s pure rules: when a role that exited is started again and after how long,
 * when the supervisor gives up; what it reports of a child's last words; and its table of roles,
 * which is the Procfile's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { decideRestart, describeStderr, NO_EXITS, PROCFILE_PROCESSES, RELEASE_ARGS, RESTART_POLICY, type ExitHistory, type RestartDecision } from '../../services/start.js';
import { procfileCommands } from '../../scripts/bench/stack.js';

test('restart or give up, and the pause before a restart', () => {
  const stable = RESTART_POLICY.stableMs;
  const h = (failures: number, startFailures: number): ExitHistory => ({ failures, startFailures });
  const restart = (delayMs: number, history: ExitHistory): RestartDecision => ({ action: 'restart', delayMs, history });
  const table: Array<[string, ExitHistory, { started: boolean; ranMs: number }, RestartDecision]> = [
    ['first crash after a start: half a second', NO_EXITS, { started: true, ranMs: 5_000 }, restart(500, h(1, 0))],
    ['a second quick crash doubles the pause', h(1, 0), { started: true, ranMs: 2_000 }, restart(1_000, h(2, 0))],
    ['a third: 2 s', h(2, 0), { started: true, ranMs: 2_000 }, restart(2_000, h(3, 0))],
    ['crashing on and on: the pause stops at 30 s', h(12, 0), { started: true, ranMs: 100 }, restart(30_000, h(13, 0))],
    ['a crash after a stable run starts the count again', h(12, 0), { started: true, ranMs: stable }, restart(500, h(1, 0))],
    ['a first failed start: restarted', NO_EXITS, { started: false, ranMs: 1_500 }, restart(500, h(1, 1))],
    ['a second failed start in a row: restarted later', h(1, 1), { started: false, ranMs: 1_500 }, restart(1_000, h(2, 2))],
    ['a third failed start in a row: give up', h(2, 2), { started: false, ranMs: 1_500 }, { action: 'give-up', history: h(3, 3) }],
    ['a start between failed starts resets their count', h(2, 2), { started: true, ranMs: 1_500 }, restart(2_000, h(3, 0))],
    ['a failed start after crashes keeps the growing pause', h(4, 0), { started: false, ranMs: 1_000 }, restart(8_000, h(5, 1))],
    ['waiting long for the schema, then failing, still counts as a failed start', h(1, 2), { started: false, ranMs: stable * 5 }, { action: 'give-up', history: h(1, 3) }],
  ];
  for (const [what, history, exit, expected] of table) {
    assert.deepEqual(decideRestart(history, exit), expected, what);
  }
  assert.deepEqual(decideRestart(NO_EXITS, { started: false, ranMs: 10 }, { ...RESTART_POLICY, maxStartFailures: 1 }), { action: 'give-up', history: h(1, 1) },
    'the policy is a parameter');
});

test('a child\'s last words: its last stderr lines without stack frames', () => {
  const table: Array<[string[], string | null]> = [
    [[], null],
    [['', '  '], null],
    [['PORT: port 8080 is already in use (another switchboard process or another program listens on it); stop that process or choose another port'],
      'PORT: port 8080 is already in use (another switchboard process or another program listens on it); stop that process or choose another port'],
    [['Cannot reach PostgreSQL at postgres://127.0.0.1:1/x: connect ECONNREFUSED.', 'Start it (…) or set DATABASE_URL.'],
      'Cannot reach PostgreSQL at postgres://127.0.0.1:1/x: connect ECONNREFUSED. Start it (…) or set DATABASE_URL.'],
    [['switchboard web: Error: boom', '    at f (file.js:1:1)', '    at g (file.js:2:2)'], 'switchboard web: Error: boom'],
    [['a', 'b', 'c', 'd'], 'b c d'],
  ];
  for (const [lines, expected] of table) assert.equal(describeStderr(lines), expected, JSON.stringify(lines));
});

test('the supervisor runs the Procfile\'s lines, in its order, with its arguments', () => {
  const procfile = procfileCommands(readFileSync(new URL('../../Procfile', import.meta.url), 'utf8'));
  assert.deepEqual(procfile.map(([name, args]) => [name, [...args]]), [
    ['release', [...RELEASE_ARGS]],
    ...PROCFILE_PROCESSES.map((p) => [p.name, [...p.args]]),
  ]);
});

test('SIGTERM to `npm start` (and the other start scripts, `npm run dev`) reaches the service, not only npm\'s shell', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
  const starts = Object.entries(pkg.scripts).filter(([name, line]) => line.includes('scripts/start.sh') || name === 'dev');
  assert.ok(starts.some(([name]) => name === 'start'), 'npm start runs scripts/start.sh');
  // npm runs a script with `sh -c` (dash here) and passes SIGTERM to that shell only: a shell that
  // does not exec its command dies of it and leaves the service running without a parent.
  for (const [name, line] of starts) assert.match(line, /^exec /, `${name}: the shell must exec the service`);

  // The real thing: npm with package.json's own `start` line, scripts/start.sh a stand-in that says
  // whether the signal reached it.
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-npm-start-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, 'scripts'));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'npm-start-signal', version: '1.0.0', private: true, scripts: { start: pkg.scripts.start } }));
  writeFileSync(path.join(dir, 'scripts', 'start.sh'),
    'trap \'echo TERM >> got; exit 0\' TERM\necho $$ > started\nwhile :; do sleep 0.1; done\n');
  const npm = spawn('npm', ['start', '--silent'], { cwd: dir, stdio: 'ignore', detached: true });
  const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
  const started = path.join(dir, 'started');
  for (let i = 0; i < 200 && !existsSync(started); i++) await delay(50);
  const pid = Number(readFileSync(started, 'utf8').trim());
  try {
    npm.kill('SIGTERM');
    await exited;
    for (let i = 0; i < 40 && !existsSync(path.join(dir, 'got')); i++) await delay(50);
    assert.ok(existsSync(path.join(dir, 'got')), 'scripts/start.sh got the SIGTERM sent to npm');
  } finally {
    try {
      process.kill(-npm.pid!, 'SIGKILL');
    } catch { /* gone */ }
    try {
      process.kill(pid, 'SIGKILL');
    } catch { /* gone */ }
  }
});
