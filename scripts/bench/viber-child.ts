/**
 * The Viber simulator as a benchmark child process (scripts/sim/viber/simulator.ts, official and
 * partner dialects on one port, its `/_sim/…` control routes included), plus a small control API
 * of its own: the simulator's counters, when the first and last send arrived, sends per second.
 * Exits when its stdin closes (the harness died) or on SIGTERM/SIGINT.
 *
 *   node dist/scripts/bench/viber-child.js [--callback-delay 50] [--expire-after 1000]
 *   → prints {"event":"listening","url":…,"port":…,"controlPort":…}
 *   GET  /stats    the simulator's stats, firstSendAt / lastSendAt (epoch ms), sendsPerSecond
 *   POST /config   {callbackUrl, callbackToken}: where callbacks go
 *   POST /reset    forgets messages, callbacks, counters and times
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { SIM_HOST, startViberSimulator } from '../sim/viber/simulator.js';
import { readJson, send, stopWithHarness } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'callback-delay': { type: 'string', default: '50' },
    'expire-after': { type: 'string', default: '1000' },
  },
  strict: true,
});

const sim = await startViberSimulator({
  callbackDelayMs: Number(values['callback-delay']),
  expireAfterMs: Number(values['expire-after']),
  // The harness reads no records: a short list keeps memory flat.
  maxRecords: 1000,
  callbackConcurrency: 32,
});

// The simulator keeps counters, not times: sampled here often enough for per-second figures.
let firstSendAt = 0;
let lastSendAt = 0;
let lastCount = 0;
let perSecond: number[] = [];
const sampler = setInterval(() => {
  const s = sim.stats();
  const count = s.official.requests + s.partner.requests;
  if (count === lastCount) return;
  const now = Date.now();
  if (firstSendAt === 0) firstSendAt = now;
  lastSendAt = now;
  const slot = Math.floor((now - firstSendAt) / 1000);
  while (perSecond.length <= slot) perSecond.push(0);
  perSecond[slot]! += count - lastCount;
  lastCount = count;
}, 20);

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const route = `${req.method ?? 'GET'} ${new URL(req.url ?? '/', `http://${SIM_HOST}`).pathname}`;
  switch (route) {
    case 'GET /stats':
      send(res, 200, { ...sim.stats(), firstSendAt, lastSendAt, sendsPerSecond: perSecond });
      return;
    case 'POST /config': {
      const body = await readJson(req);
      sim.configure({
        ...(typeof body.callbackUrl === 'string' && { callbackUrl: body.callbackUrl }),
        ...(typeof body.callbackToken === 'string' && { callbackToken: body.callbackToken }),
      });
      send(res, 200, { ok: true });
      return;
    }
    case 'POST /reset':
      sim.reset();
      firstSendAt = lastSendAt = lastCount = 0;
      perSecond = [];
      send(res, 200, { ok: true });
      return;
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

const control = http.createServer((req, res) => {
  handle(req, res).catch((err: unknown) => send(res, 400, { error: err instanceof Error ? err.message : String(err) }));
});
await new Promise<void>((resolve, reject) => {
  control.once('error', reject);
  control.listen(0, SIM_HOST, () => resolve());
});
const controlPort = (control.address() as AddressInfo).port;
process.stdout.write(`${JSON.stringify({ event: 'listening', url: sim.url, port: sim.port, controlPort })}\n`);

stopWithHarness(() => {
  clearInterval(sampler);
  control.closeAllConnections();
  control.close();
  return sim.stop();
});
