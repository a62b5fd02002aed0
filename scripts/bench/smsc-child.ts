/**
 * The SMSC simulator as a benchmark child process (scripts/smsc-simulator.ts, driven over a small
 * control API). Besides the simulator's counters it keeps, per destination number, when its first
 * submit_sm arrived (so the harness can match priority messages), and the times of the first and
 * last submit and receipt. Exits when its stdin closes (the harness died) or on SIGTERM/SIGINT.
 *
 *   node dist/scripts/bench/smsc-child.js [--receipt-delay 50] [--slow-delay 5000] [--smsc-ids hex|dec|string]
 *   → prints {"event":"listening","port":…,"controlPort":…}
 *   GET  /stats                      counters + first/last submit and receipt times (epoch ms)
 *   POST /lookup {destinations: []}  → {times: {destination: epoch ms of its first submit_sm | null}}
 *   POST /reset                      clears counters and times
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { SIM_HOST, SmscSimulator, type SimIdForm } from '../smsc-simulator.js';
import { readJson, runSimulatorChild, send } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'receipt-delay': { type: 'string', default: '50' },
    'slow-delay': { type: 'string', default: '5000' },
    'smsc-ids': { type: 'string', default: 'hex' },
  },
  strict: true,
});

/** `--smsc-ids`: the ids this SMSC issues, written the same way in its receipts. */
const ID_FORMS: Record<string, SimIdForm> = { hex: 'hex', dec: 'decimal', string: 'string' };
const idForm = ID_FORMS[values['smsc-ids'] ?? 'hex'];
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
  // The harness's default SMPP_URL declares the same forms (submit_id=hex&receipt_id=hex for hex).
  idForm,
  receiptIdForm: 'same',
});

let firstSubmitAt = 0;
let lastSubmitAt = 0;
let firstReceiptAt = 0;
let lastReceiptAt = 0;
const firstSubmitOf = new Map<string, number>();
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
    case 'POST /lookup': {
      const body = await readJson(req);
      const list = Array.isArray(body.destinations) ? body.destinations.filter((d): d is string => typeof d === 'string') : [];
      send(res, 200, { times: Object.fromEntries(list.map((d) => [d, firstSubmitOf.get(d) ?? null])) });
      return;
    }
    case 'POST /reset':
      sim.reset();
      firstSubmitOf.clear();
      firstSubmitAt = lastSubmitAt = firstReceiptAt = lastReceiptAt = 0;
      perSecond = [];
      send(res, 200, { ok: true });
      return;
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

runSimulatorChild(sim, handle);
