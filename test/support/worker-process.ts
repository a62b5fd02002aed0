/**
 * A `switchboard worker` in a child process on a test service's database and Redis prefix, for
 * tests of what several processes share (throughput caps). Its output is kept for failure messages.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { REDIS_URL, type TestService } from './harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface WorkerProcess {
  child: ChildProcess;
  output: string[];
}

/** `args`: after `worker` (`--pools=…`, `--lanes=…`); `env` adds to the service's database and prefix. */
export function startWorkerProcess(svc: TestService, args: string[], env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'worker', ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      DATABASE_URL: svc.databaseUrl,
      REDIS_URL,
      REDIS_PREFIX: svc.prefix,
      MIGRATE_ON_START: '0',
      LOG_LEVEL: 'warn',
      PORT: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  return { child, output };
}

export async function stopWorkerProcess(w: WorkerProcess): Promise<void> {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => w.child.once('exit', () => resolve()));
  w.child.kill('SIGTERM');
  const timer = setTimeout(() => w.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
