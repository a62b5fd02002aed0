/**
 * SMSC simulator CLI (see scripts/smsc-simulator.ts for behaviour).
 *
 *   npm run smsc -- --port 2775 [--control-port 2776] [--system-id ID --password PW]
 *        [--id-form hex|hex-lower|decimal|decimal-padded|string] [--receipt-id-form same|hex|hex-lower|decimal|decimal-padded|string]
 *        [--receipt-delay 50] [--slow-delay 5000] [--response-delay 0] [--enquire-link 0] [--receipt-first]
 *   (npm run smsc = node --import tsx scripts/smsc.ts)
 *
 * Prints one JSON line when listening: {"event":"listening","host":"127.0.0.1","port":…,"controlPort":…}.
 * Control API (HTTP, 127.0.0.1 only, JSON):
 *   POST /mo    {from, to, text, udh16?, reverse?, spread?}      → {parts, statuses}
 *   POST /mode  {throttle?: bool|number, silent?: bool, refuseBinds?: bool, dropConnections?: true} → mode
 *   GET  /stats                                                  → counters, mode, sessions
 *   GET  /submitted?limit=N                                      → last N submitted records
 *   POST /reset                                                  → clears records and counters
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { readJson, send } from './control-http.js';
import { SIM_HOST, SIM_ID_FORMS, SmscSimulator, type SimIdForm, type SubmittedRecord } from './smsc-simulator.js';

const USAGE = `usage: npm run smsc -- [options]   (SMSC simulator: SMPP 3.4 on 127.0.0.1)

  --port N                 SMPP port (default 2775; 0 = any free port)
  --control-port N         HTTP control API on 127.0.0.1 (POST /mo, /mode, /reset; GET /stats, /submitted)
  --system-id ID --password PW   credentials a bind must present (default: any)
  --id-form FORM           message id form of submit_sm_resp: hex|hex-lower|decimal|decimal-padded|string (default hex)
  --receipt-id-form FORM   id form in receipts: same|hex|hex-lower|decimal|decimal-padded|string (default same)
  --receipt-delay MS       delay of delivery receipts (default 50)
  --slow-delay MS          delay of the slow outcome's receipt (default 5000)
  --response-delay MS      delay of submit_sm_resp (default 0)
  --enquire-link MS        enquire_link interval (default 0 = off)
  --receipt-first          send the receipt before the submit_sm_resp
  --deliver-with PDU       PDU of receipts and MO: deliver_sm|data_sm (default deliver_sm)
  -h, --help               this text

Prints one JSON line when listening: {"event":"listening","host":…,"port":…,"controlPort":…}.
`;

function parseOptions() {
  try {
    return parseArgs({
      options: {
    port: { type: 'string', default: '2775' },
    'control-port': { type: 'string' },
    'system-id': { type: 'string' },
    password: { type: 'string' },
    'id-form': { type: 'string', default: 'hex' },
    'receipt-id-form': { type: 'string', default: 'same' },
    'receipt-delay': { type: 'string', default: '50' },
    'slow-delay': { type: 'string', default: '5000' },
    'response-delay': { type: 'string', default: '0' },
    'enquire-link': { type: 'string', default: '0' },
        'receipt-first': { type: 'boolean', default: false },
        'deliver-with': { type: 'string', default: 'deliver_sm' },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
    });
  } catch (err) {
    process.stderr.write(`smsc: ${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (npm run smsc -- --help lists the options)\n`);
    process.exit(2);
  }
}

const { values } = parseOptions();
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

function int(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`--${name} must be an integer ${min}..${max}\n`);
    process.exit(2);
  }
  return n;
}

function form<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    process.stderr.write(`--${name} must be one of ${allowed.join(', ')}\n`);
    process.exit(2);
  }
  return value as T;
}

const sim = new SmscSimulator({
  port: int('port', values.port, 0, 65535),
  systemId: values['system-id'],
  password: values.password,
  idForm: form<SimIdForm>('id-form', values['id-form'], SIM_ID_FORMS),
  receiptIdForm: form<SimIdForm | 'same'>('receipt-id-form', values['receipt-id-form'], ['same', ...SIM_ID_FORMS]),
  receiptDelayMs: int('receipt-delay', values['receipt-delay'], 0, 3_600_000),
  slowReceiptDelayMs: int('slow-delay', values['slow-delay'], 0, 3_600_000),
  responseDelayMs: int('response-delay', values['response-delay'], 0, 3_600_000),
  enquireLinkIntervalMs: int('enquire-link', values['enquire-link'], 0, 3_600_000),
  receiptFirst: values['receipt-first'] === true,
  deliverWith: form('deliver-with', values['deliver-with'], ['deliver_sm', 'data_sm'] as const),
});

function recordJson(r: SubmittedRecord): Record<string, unknown> {
  return { ...r, udh: r.udh ? r.udh.toString('hex') : null };
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', `http://${SIM_HOST}`);
  const route = `${req.method ?? 'GET'} ${url.pathname}`;
  switch (route) {
    case 'POST /mo': {
      const body = await readJson(req);
      const { from, to, text } = body;
      if (typeof from !== 'string' || typeof to !== 'string' || typeof text !== 'string') {
        send(res, 400, { error: 'from, to and text must be strings' });
        return;
      }
      try {
        send(res, 200, await sim.sendMo({ from, to, text, udh16: body.udh16 === true, reverse: body.reverse === true, spread: body.spread === true }));
      } catch (err) {
        send(res, 409, { error: err instanceof Error ? err.message : String(err) });
      }
      return;
    }
    case 'POST /mode': {
      const body = await readJson(req);
      const change: { throttle?: boolean | number; silent?: boolean; refuseBinds?: boolean; dropConnections?: boolean } = {};
      if (typeof body.throttle === 'boolean' || typeof body.throttle === 'number') change.throttle = body.throttle;
      if (typeof body.silent === 'boolean') change.silent = body.silent;
      if (typeof body.refuseBinds === 'boolean') change.refuseBinds = body.refuseBinds;
      if (body.dropConnections === true) change.dropConnections = true;
      send(res, 200, sim.setMode(change));
      return;
    }
    case 'GET /stats':
      send(res, 200, {
        counters: sim.counters,
        mode: sim.mode,
        openSessions: sim.openSessions,
        boundSessions: sim.boundSessions,
        outstanding: sim.outstanding,
        recorded: sim.submitted.length,
      });
      return;
    case 'GET /submitted': {
      const limit = Math.max(0, Math.min(10_000, Number(url.searchParams.get('limit') ?? 100) || 0));
      send(res, 200, sim.submitted.slice(-limit).map(recordJson));
      return;
    }
    case 'POST /reset':
      sim.reset();
      send(res, 200, { ok: true });
      return;
    default:
      send(res, 404, { error: `no route ${route}` });
  }
}

async function main(): Promise<void> {
  const { host, port } = await sim.start();
  let controlPort: number | null = null;
  let control: http.Server | null = null;
  if (values['control-port'] !== undefined) {
    const server = http.createServer((req, res) => {
      handle(req, res).catch((err: unknown) => send(res, 400, { error: err instanceof Error ? err.message : String(err) }));
    });
    control = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(int('control-port', values['control-port'], 0, 65535), SIM_HOST, () => resolve());
    });
    controlPort = (server.address() as AddressInfo).port;
  }
  process.stdout.write(`${JSON.stringify({ event: 'listening', host, port, controlPort })}\n`);
  const shutdown = (): void => {
    control?.close();
    control?.closeAllConnections();
    void sim.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
