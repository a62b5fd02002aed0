/**
 * A private Redis Cluster for tests: `masters` redis-server processes in cluster mode on free
 * loopback ports (no persistence, no replicas), each with its own directory under a temporary one,
 * joined by `redis-cli --cluster create`. `stop()` ends the processes and removes the directory.
 * The shared Redis on 6379 is not touched.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, mkdir, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { stopChild } from './processes.js';
import { untilReady } from './own-redis.js';

const run = promisify(execFile);

export interface OwnRedisCluster {
  /** `127.0.0.1:<port>` of every master. */
  nodes: string[];
  /** REDIS_CLUSTER_NODES for the service. */
  env: string;
  ports: number[];
  stop(): Promise<void>;
}

async function freePorts(count: number): Promise<number[]> {
  // Held open together, so no two are the same.
  const servers = await Promise.all(Array.from({ length: count }, async () => {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return server;
  }));
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}

/** Starts one node; `children` gets it at once, so a node that fails to start is still stopped. */
async function startNode(children: ChildProcess[], dir: string, port: number, busPort: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  const child = spawn('redis-server', [
    '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1',
    '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000',
    '--save', '', '--appendonly', 'no', '--dir', dir,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  await untilReady(child, `redis-server (cluster node ${port})`);
  child.stdout?.removeAllListeners('data');
  child.stdout?.resume();
  child.stderr?.resume();
}

export async function startRedisCluster(masters = 3): Promise<OwnRedisCluster> {
  const root = await mkdtemp(path.join(tmpdir(), 'sb-redis-cluster-'));
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map((c) => stopChild(c, 5_000)));
    await rm(root, { recursive: true, force: true });
  };
  try {
    const ports = await freePorts(masters * 2);
    const clientPorts = ports.slice(0, masters);
    for (let i = 0; i < masters; i++) {
      await startNode(children, path.join(root, `node-${i}`), clientPorts[i]!, ports[masters + i]!);
    }
    const nodes = clientPorts.map((p) => `127.0.0.1:${p}`);
    await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20_000 });
    // Every node must see every slot covered before a client is pointed at it.
    const deadline = Date.now() + 15_000;
    for (const port of clientPorts) {
      for (;;) {
        const { stdout } = await run('redis-cli', ['-p', String(port), 'cluster', 'info']);
        if (/cluster_state:ok/.test(stdout) && /cluster_slots_assigned:16384/.test(stdout) && new RegExp(`cluster_known_nodes:${masters}`).test(stdout)) break;
        if (Date.now() > deadline) throw new Error(`Redis Cluster not ready on ${port}: ${stdout}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return { nodes, env: nodes.join(','), ports: clientPorts, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
