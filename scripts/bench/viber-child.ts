/**
 * The Viber simulator as a benchmark child process (scripts/sim/viber/simulator.ts, official and
 * partner dialects on one port, its `/_sim/…` control routes included), plus a small control API
 * of its own: the simulator's counters, when the first and last send arrived, sends per second.
 * Exits when its stdin closes (the harness died) or on SIGTERM/SIGINT.
 *
 *   node dist/scripts/bench/viber-child.js [--callback-delay 50] [--expire-after 1000]
 *   → prints {"event":"listening","host":…,"port":…,"controlPort":…}
 *   GET  /stats    the simulator's stats, firstSendAt / lastSendAt (epoch ms), sendsPerSecond
 *   POST /config   {callbackUrl, callbackToken}: where callbacks go
 *   POST /reset    forgets messages, callbacks, counters and times
 */
import type http from 'node:http';
import { parseArgs } from 'node:util';
import { SIM_HOST, startViberSimulator, type ViberSimulator } from '../sim/viber/simulator.js';
import { readJson, runSimulatorChild, send } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'callback-delay': { type: 'string', default: '50' },
    'expire-after': { type: 'string', default: '1000' },
  },
  strict: true,
});

let sim: ViberSimulator | null = null;
const simulator = (): ViberSimulator => {
  if (!sim) throw new Error('the simulator is not started');
  return sim;
};

// The simulator keeps counters, not times: sampled here often enough for per-second figures.
let firstSendAt = 0;
let lastSendAt = 0;
let lastCount = 0;
let perSecond: number[] = [];
let sampler: NodeJS.Timeout | null = null;

function sample(): void {
  const s = simulator().stats();
  const count = s.official.requests + s.partner.requests;
  if (count === lastCount) return;
  const now = Date.now();
  if (firstSendAt === 0) firstSendAt = now;
  lastSendAt = now;
  const slot = Math.floor((now - firstSendAt) / 1000);
  while (perSecond.length <= slot) perSecond.push(0);
  perSecond[slot]! += count - lastCount;
  lastCount = count;
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const route = `${req.method ?? 'GET'} ${new URL(req.url ?? '/', `http://${SIM_HOST}`).pathname}`;
  switch (route) {
    case 'GET /stats':
      send(res, 200, { ...simulator().stats(), firstSendAt, lastSendAt, sendsPerSecond: perSecond });
      return;
    case 'POST /config': {
      const body = await readJson(req);
      simulator().configure({
        ...(typeof body.callbackUrl === 'string' && { callbackUrl: body.callbackUrl }),
        ...(typeof body.callbackToken === 'string' && { callbackToken: body.callbackToken }),
      });
      send(res, 200, { ok: true });
      return;
    }
    case 'POST /reset':
      simulator().reset();
      firstSendAt = lastSendAt = lastCount = 0;
      perSecond = [];
      send(res, 200, { ok: true });
      return;
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

runSimulatorChild({
  start: async () => {
    sim = await startViberSimulator({
      callbackDelayMs: Number(values['callback-delay']),
      expireAfterMs: Number(values['expire-after']),
      // The harness reads no records: a short list keeps memory flat.
      maxRecords: 1000,
      callbackConcurrency: 32,
    });
    sampler = setInterval(sample, 20);
    return { host: SIM_HOST, port: sim.port };
  },
  stop: async () => {
    if (sampler) clearInterval(sampler);
    await sim?.stop();
  },
}, handle);
