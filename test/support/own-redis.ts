/**
 * A private redis-server on a free loopback port (no persistence), for tests that count Redis
 * commands or must stop Redis without touching the shared instance. Stopped (and its process
 * gone) when `stop()` resolves; `start()` brings an empty one back on the same port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net, { type AddressInfo } from 'node:net';
import { stopChild } from './processes.js';

export interface OwnRedis {
  url: string;
  port: number;
  /** `INFO commandstats` as command → calls (lower-case names, e.g. `evalsha`). */
  commandCalls(): Promise<Record<string, number>>;
  stop(): Promise<void>;
  /** After stop(): a fresh, empty redis-server on the same port (clients reconnect to it). */
  start(): Promise<void>;
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

export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const launch = async (): Promise<ChildProcess> => {
    const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
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
    stop: () => stopChild(child, 5_000),
    start: async () => {
      child = await launch();
    },
  };
}
