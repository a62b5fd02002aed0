/**
 * A private redis-server on a free loopback port, for tests that count Redis commands or must stop
 * Redis without touching the shared instance. No persistence unless `aof` (append-only file,
 * `everysec`, in a directory of its own). Stopped (and its process gone) when `stop()` resolves;
 * `start()` brings one back on the same port: empty, or with what its AOF kept.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import net, { type AddressInfo } from 'node:net';
import { stopChild } from './processes.js';

export interface OwnRedis {
  url: string;
  port: number;
  /** `INFO commandstats` as command → calls (lower-case names, e.g. `evalsha`). */
  commandCalls(): Promise<Record<string, number>>;
  stop(): Promise<void>;
  /** stop(), and its AOF directory removed (the test's end). */
  remove(): Promise<void>;
  /**
   * After stop(): a redis-server on the same port again (clients reconnect to it), with what its
   * AOF kept, or empty (always without `aof`; with `empty`, its AOF is removed first).
   */
  start(opts?: { empty?: boolean }): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves when a starting redis-server says it accepts connections; rejects when it exits first or takes over 10 s. */
export async function untilReady(child: ChildProcess, what: string): Promise<void> {
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${output}`)), 10_000);
    child.stdout?.on('data', (d: Buffer) => {
      output += d.toString();
      if (/Ready to accept connections/.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}): ${output}`));
    });
  });
  child.removeAllListeners('exit');
}

export async function startOwnRedis(opts: { aof?: boolean } = {}): Promise<OwnRedis> {
  const port = await freePort();
  const dir = opts.aof ? await mkdtemp(path.join(os.tmpdir(), 'sb-redis-')) : null;
  const persistence = dir ? ['--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir] : ['--appendonly', 'no'];
  const launch = async (): Promise<ChildProcess> => {
    const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await untilReady(started, 'redis-server');
    return started;
  };
  let child = await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    commandCalls: async () => {
      const { Redis } = await import('ioredis');
      const client = new Redis(`redis://127.0.0.1:${port}`);
      try {
        const info = await client.info('commandstats');
        const calls: Record<string, number> = {};
        for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
        return calls;
      } finally {
        client.disconnect();
      }
    },
    stop: async () => {
      await stopChild(child, 5_000);
    },
    remove: async () => {
      await stopChild(child, 5_000);
      if (dir) await rm(dir, { recursive: true, force: true });
    },
    start: async ({ empty = false } = {}) => {
      if (dir && empty) {
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir);
      }
      child = await launch();
    },
  };
}
