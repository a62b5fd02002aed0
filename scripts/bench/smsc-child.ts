/**
 * The SMSC simulator as a benchmark child process (scripts/smsc-simulator.ts, driven over a small
 * control API). Besides the simulator's counters it keeps, per destination number, when its first
 * submit_sm arrived (so the harness can match priority messages), and the times of the first and
 * last submit and receipt. Exits when its stdin closes (the harness died) or on SIGTERM/SIGINT.
 *
 *   node dist/scripts/bench/smsc-child.js [--receipt-delay 50] [--slow-delay 5000] [--smsc-ids dec|hex|string] [--redeliver MS]
 *   → prints {"event":"listening","port":…,"controlPort":…}
 *   GET  /stats                      counters + first/last submit and receipt times (epoch ms)
 *   GET  /repeats                    destinations submitted more than once (each benchmark recipient has a
 *                                    number of its own: a repeat is that recipient submitted twice)
 *   POST /lookup {destinations: []}  → {times: {destination: epoch ms of its first submit_sm | null}}
 *   POST /reset                      clears counters and times
 * `--redeliver MS`: a receipt whose deliver_sm was not acknowledged (its session died) is sent again
 * after MS, as SMSCs do (the benchmark's --kill-one); 0 (default) never.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { SIM_HOST, SmscSimulator, type SimIdForm } from '../smsc-simulator.js';
import { readJson, runSimulatorChild, send } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'receipt-delay': { type: 'string', default: '50' },
    'slow-delay': { type: 'string', default: '5000' },
    'smsc-ids': { type: 'string', default: 'dec' },
    redeliver: { type: 'string', default: '0' },
  },
  strict: true,
});

/** `--smsc-ids`: the ids this SMSC issues, written the same way in its receipts. */
const ID_FORMS: Record<string, SimIdForm> = { hex: 'hex', dec: 'decimal', string: 'string' };
const idForm = ID_FORMS[values['smsc-ids'] ?? 'dec'];
if (!idForm) {
  process.stderr.write(`--smsc-ids must be one of ${Object.keys(ID_FORMS).join(', ')}\n`);
  process.exit(2);
}

const sim = new SmscSimulator({
  port: 0,
  receiptDelayMs: Number(values['receipt-delay']),
  slowReceiptDelayMs: Number(values['slow-delay']),
  // The harness does not read records; a short list keeps memory flat and shift() cheap.
  maxRecords: 100,
  // The harness's default SMPP_URL leaves the id forms to the service (auto); --smpp-params may declare them.
  idForm,
  receiptIdForm: 'same',
  redeliverMs: Number(values.redeliver),
});

let firstSubmitAt = 0;
let lastSubmitAt = 0;
let firstReceiptAt = 0;
let lastReceiptAt = 0;
const firstSubmitOf = new Map<string, number>();
/** Destinations submitted more than once: [submit_sm received, accepted (given an id)]. */
const repeats = new Map<string, [number, number]>();
/** Destinations whose first submit_sm was refused (rare: for the accepted count of a repeat). */
const refusedFirst = new Set<string>();
/** Submits per second since the first one (index = second). */
let perSecond: number[] = [];

sim.on('submit', (record) => {
  const now = record.receivedAt;
  if (firstSubmitAt === 0) {
    firstSubmitAt = now;
  }
  lastSubmitAt = now;
  if (!firstSubmitOf.has(record.destination_addr)) {
    firstSubmitOf.set(record.destination_addr, now);
    if (record.messageId === null) {
      refusedFirst.add(record.destination_addr);
    }
  } else {
    const r = repeats.get(record.destination_addr) ?? [1, refusedFirst.has(record.destination_addr) ? 0 : 1];
    r[0]++;
    if (record.messageId !== null) {
      r[1]++;
    }
    repeats.set(record.destination_addr, r);
  }
  const slot = Math.floor((now - firstSubmitAt) / 1000);
  while (perSecond.length <= slot) {
    perSecond.push(0);
  }
  perSecond[slot]!++;
});
sim.on('receipt', () => {
  const now = Date.now();
  if (firstReceiptAt === 0) {
    firstReceiptAt = now;
  }
  lastReceiptAt = now;
});

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const route = `${req.method ?? 'GET'} ${new URL(req.url ?? '/', `http://${SIM_HOST}`).pathname}`;
  switch (route) {
    case 'GET /stats':
      send(res, 200, {
        counters: sim.counters,
        boundSessions: sim.boundSessions,
        outstanding: sim.outstanding,
        firstSubmitAt,
        lastSubmitAt,
        firstReceiptAt,
        lastReceiptAt,
        destinations: firstSubmitOf.size,
        submitsPerSecond: perSecond,
      });
      return;
    case 'GET /repeats': {
      let extraSubmits = 0;
      let givenTwoIds = 0;
      for (const [submits, accepted] of repeats.values()) {
        extraSubmits += submits - 1;
        if (accepted > 1) {
          givenTwoIds++;
        }
      }
      send(res, 200, {
        destinations: firstSubmitOf.size,
        repeated: repeats.size,
        extraSubmits,
        givenTwoIds,
        examples: [...repeats].slice(0, 5).map(([d, [submits, accepted]]) => `${d}: ${submits} submit_sm, ${accepted} accepted`),
      });
      return;
    }
    case 'POST /lookup': {
      const body = await readJson(req);
      const list = Array.isArray(body.destinations) ? body.destinations.filter((d): d is string => typeof d === 'string') : [];
      send(res, 200, { times: Object.fromEntries(list.map((d) => [d, firstSubmitOf.get(d) ?? null])) });
      return;
    }
    case 'POST /reset':
      sim.reset();
      firstSubmitOf.clear();
      repeats.clear();
      refusedFirst.clear();
      firstSubmitAt = lastSubmitAt = firstReceiptAt = lastReceiptAt = 0;
      perSecond = [];
      send(res, 200, { ok: true });
      return;
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

runSimulatorChild(sim, handle);
