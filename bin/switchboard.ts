/**
 * Process entry: `switchboard all | web | worker [--pools=sms,viber,whatsapp,status,webhooks,relay,sweep]
 * [--lanes=priority,transactional,promotional]`. `all` (the default of `npm start`) runs the API,
 * every worker pool and the sandbox in one process. `--lanes` limits the dispatch pools to some
 * lanes: a process of its own for the priority lane keeps OTPs off a busy backlog's event loop.
 */
import { startRuntime, StartupError, ALL_POOLS, type PoolName, type Role } from '../services/runtime.js';
import { LANES, type Lane } from '../shared/queues.js';
import { ConfigError } from '../shared/config.js';

const [roleArg = 'all', ...rest] = process.argv.slice(2);
const role = roleArg as Role;
if (!['all', 'web', 'worker'].includes(role)) {
  console.error(`unknown role "${roleArg}": use all, web or worker`);
  process.exit(2);
}
const poolsArg = rest.find((a) => a.startsWith('--pools='))?.slice('--pools='.length);
const pools = poolsArg ? (poolsArg.split(',') as PoolName[]) : ALL_POOLS;
const unknown = pools.filter((p) => !ALL_POOLS.includes(p));
if (unknown.length) {
  console.error(`unknown pools: ${unknown.join(', ')} (known: ${ALL_POOLS.join(', ')})`);
  process.exit(2);
}

const lanesArg = rest.find((a) => a.startsWith('--lanes='))?.slice('--lanes='.length);
const lanes = lanesArg !== undefined ? (lanesArg.split(',').filter(Boolean) as Lane[]) : LANES;
const unknownLanes = lanes.filter((l) => !LANES.includes(l));
if (unknownLanes.length || lanes.length === 0) {
  console.error(`unknown lanes: ${unknownLanes.join(', ') || '(none given)'} (known: ${LANES.join(', ')})`);
  process.exit(2);
}

try {
  const runtime = await startRuntime({ role, pools, lanes });
  let signalled = false;
  const shutdown = (signal: string) => {
    if (signalled) {
      return;
    }
    signalled = true;
    runtime.logger.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      runtime.logger.error('graceful shutdown took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    runtime.stop().then(() => process.exit(0), (err: unknown) => {
      runtime.logger.error({ err }, 'shutdown failed');
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
} catch (err) {
  if (err instanceof ConfigError || err instanceof StartupError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}
