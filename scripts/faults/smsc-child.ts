/**
 * The SMSC simulator as a child process of the fault suite (scripts/faults/run.ts): message ids in
 * the form asked for (default hex: 8 upper-case digits, `00001234`, which read as a decimal number
 * name an older message), a latency on every submit_sm_resp, receipts a while later, and receipts
 * sent again until acknowledged (as an SMSC does). It remembers, per destination, how often it was submitted and when, so the suite can
 * count duplicate submits and priority latencies; and it can take the link down.
 *
 *   node dist/scripts/faults/smsc-child.js [--id-form hex|decimal] [--response-delay 50] [--receipt-delay 100] [--slow-delay 5000]
 *   → prints {"event":"listening","port":…,"controlPort":…}
 *   GET  /stats                 counters, bound sessions, destinations, submits so far
 *   GET  /destinations          → {destinations: [[destination, submits, accepted, firstAt, lastAt, receipts, lastStat], …]}
 *   POST /link-down {ms}        drops every connection and refuses binds for `ms`
 * Exits when its stdin closes (the suite died) or on SIGTERM/SIGINT.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';
import { SIM_HOST, SmscSimulator } from '../smsc-simulator.js';
import { readJson, runSimulatorChild, send } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'id-form': { type: 'string', default: 'hex' },
    'response-delay': { type: 'string', default: '50' },
    'receipt-delay': { type: 'string', default: '100' },
    'slow-delay': { type: 'string', default: '5000' },
  },
  strict: true,
});

const sim = new SmscSimulator({
  port: 0,
  idForm: values['id-form'] === 'decimal' ? 'decimal' : 'hex',
  receiptIdForm: 'same',
  responseDelayMs: Number(values['response-delay']),
  receiptDelayMs: Number(values['receipt-delay']),
  slowReceiptDelayMs: Number(values['slow-delay']),
  redeliverMs: 1000,
  maxRecords: 100,
});

interface Dest {
  submits: number;
  accepted: number;
  firstAt: number;
  lastAt: number;
  /** Receipts sent for this destination (again after a refusal counts again) and the last one's stat. */
  receipts: number;
  stat: string;
}
const destinations = new Map<string, Dest>();
/** SMSC message id → its destination, for the receipts. */
const destinationOf = new Map<string, string>();
let linkDownUntil = 0;

sim.on('submit', (record) => {
  const d = destinations.get(record.destination_addr);
  const accepted = record.messageId !== null ? 1 : 0;
  if (d) {
    d.submits++;
    d.accepted += accepted;
    d.lastAt = record.receivedAt;
  } else {
    destinations.set(record.destination_addr, { submits: 1, accepted, firstAt: record.receivedAt, lastAt: record.receivedAt, receipts: 0, stat: '' });
  }
  if (record.messageId !== null) {
    destinationOf.set(record.messageId, record.destination_addr);
  }
});
sim.on('receipt', ({ messageId, stat }) => {
  const d = destinations.get(destinationOf.get(messageId) ?? '');
  if (d) {
    d.receipts++;
    d.stat = stat;
  }
});

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const route = `${req.method ?? 'GET'} ${new URL(req.url ?? '/', `http://${SIM_HOST}`).pathname}`;
  switch (route) {
    case 'GET /stats':
      send(res, 200, {
        counters: sim.counters,
        boundSessions: sim.boundSessions,
        outstanding: sim.outstanding,
        destinations: destinations.size,
        linkDown: Date.now() < linkDownUntil,
      });
      return;
    case 'GET /destinations':
      send(res, 200, { destinations: [...destinations].map(([k, d]) => [k, d.submits, d.accepted, d.firstAt, d.lastAt, d.receipts, d.stat]) });
      return;
    case 'POST /link-down': {
      const body = await readJson(req);
      const ms = typeof body.ms === 'number' && body.ms >= 0 ? body.ms : 5000;
      linkDownUntil = Date.now() + ms;
      sim.setMode({ refuseBinds: true, dropConnections: true });
      setTimeout(() => {
        sim.setMode({ refuseBinds: false });
      }, ms).unref();
      send(res, 200, { downForMs: ms });
      return;
    }
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

runSimulatorChild(sim, handle);
