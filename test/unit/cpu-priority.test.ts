import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bulkWorkerNice } from '../../services/cpu-priority.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('bulkWorkerNice: only a worker that dispatches bulk lanes alone, and only when set', () => {
  const rows: Array<[string, Parameters<typeof bulkWorkerNice>[0], number | null]> = [
    ['worker_sms', { role: 'worker', dispatching: true, lanes: ['transactional', 'promotional'], nice: 10 }, 10],
    ['worker_channels, promotional only', { role: 'worker', dispatching: true, lanes: ['promotional'], nice: 5 }, 5],
    ['worker_priority', { role: 'worker', dispatching: true, lanes: ['priority'], nice: 10 }, null],
    ['a worker of every lane', { role: 'worker', dispatching: true, lanes: ['priority', 'transactional', 'promotional'], nice: 10 }, null],
    ['worker_status / worker_webhooks (no channel pool)', { role: 'worker', dispatching: false, lanes: ['transactional'], nice: 10 }, null],
    ['web', { role: 'web', dispatching: false, lanes: ['transactional'], nice: 10 }, null],
    ['all in one process', { role: 'all', dispatching: true, lanes: ['transactional'], nice: 10 }, null],
    ['BULK_WORKER_NICE=0', { role: 'worker', dispatching: true, lanes: ['transactional'], nice: 0 }, null],
  ];
  for (const [name, input, want] of rows) assert.equal(bulkWorkerNice(input), want, name);
});

/** Runs lowerCpuPriority(nice) in a fresh node process and returns what it reports. */
async function inChild(nice: number, opts: { detached: boolean; startNice?: number }): Promise<{ nice: number; autogroupNice: number | null }> {
  const script = `import { lowerCpuPriority } from './services/cpu-priority.ts'; process.stdout.write(JSON.stringify(lowerCpuPriority(${nice})));`;
  const node = [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script];
  const [cmd, ...args] = opts.startNice === undefined ? node : ['nice', '-n', String(opts.startNice), ...node];
  const child = spawn(cmd!, args, { cwd: root, detached: opts.detached, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  assert.equal(code, 0, err);
  return JSON.parse(out) as { nice: number; autogroupNice: number | null };
}

const autogroups = existsSync('/proc/self/autogroup');

test('lowerCpuPriority: a session leader lowers its process and its autogroup', async () => {
  assert.deepEqual(await inChild(7, { detached: true }), { nice: 7, autogroupNice: autogroups ? 7 : null });
});

test('lowerCpuPriority: a process in a shared session leaves the session\'s autogroup alone', async () => {
  assert.deepEqual(await inChild(7, { detached: false }), { nice: 7, autogroupNice: null });
});

test('lowerCpuPriority: never raises the priority of a process an operator started lower', async () => {
  const res = await inChild(7, { detached: true, startNice: 12 });
  assert.equal(res.nice, 12);
});
