/**
 * Viber simulator CLI (behaviour: scripts/sim/viber/simulator.ts and docs/viber.md "Simulator").
 * Prints one JSON line when listening: {"event":"listening","url":…,"port":…,"dialects":[…]}.
 */
import { parseArgs } from 'node:util';
import { SIM_DEFAULT_API_KEY, SIM_DEFAULT_SERVICE_ID, startViberSimulator, type SimDialect } from './simulator.js';

const HELP = `Viber simulator: the official Business Messages API and the partner (DecisionTelecom) dialect on 127.0.0.1.

Usage: npm run sim:viber -- [options]

  --port N                 listen port (default 8090; 0 = any free port)
  --dialect D              official, partner or both (default both)
  --callback-url URL       where callbacks go (official: all; partner: only when no callback_url came from that source)
  --callback-token T       appended to --callback-url as its last path segment
  --shared-secret S        sent as the x-callback-secret header of every callback
  --service-id N           an accepted official service id; repeatable (default ${SIM_DEFAULT_SERVICE_ID})
  --api-key K              an accepted partner API key; repeatable (default ${SIM_DEFAULT_API_KEY})
  --allow-caller A         an official caller address or CIDR; repeatable (default loopback)
  --callback-delay MS      delay of the first callback (default 20)
  --expire-after MS        suffix 01 expires after ttl or this (default 1000)
  --callback-batch N       official events per callback POST (default 100)
  --duplicates             send every receipt twice
  --reorder                send a message's receipts in reverse order
  -h, --help               this text

Outcomes by the recipient's last two digits (official / partner):
  other delivered+seen / Delivered   01 expired / Undelivered    02 status 1 / HTTP 500
  03 no callbacks                    04 status 9 / Undelivered   05 status 8 / Rejected
  06 status 10 / Error               07 status 21 / HTTP 429     08 delivered x2 (two devices)+seen / Delivered x2
  09 status 13 / HTTP 402            10 seen without delivered / Delivered

Control (JSON): POST /_sim/inbound {service_id | source_addr, from, text, tracking_data?, reply_to?}
  POST /_sim/subscription {service_id, from, subscribed}   GET /_sim/messages?to=&limit=
  GET /_sim/callbacks?limit=   GET /_sim/stats   POST /_sim/config {…}   POST /_sim/reset
`;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      port: { type: 'string', default: '8090' },
      dialect: { type: 'string', default: 'both' },
      'callback-url': { type: 'string' },
      'callback-token': { type: 'string' },
      'shared-secret': { type: 'string' },
      'service-id': { type: 'string', multiple: true },
      'api-key': { type: 'string', multiple: true },
      'allow-caller': { type: 'string', multiple: true },
      'callback-delay': { type: 'string', default: '20' },
      'expire-after': { type: 'string', default: '1000' },
      'callback-batch': { type: 'string', default: '100' },
      duplicates: { type: 'boolean', default: false },
      reorder: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
} catch (err) {
  fail(`${(err as Error).message}\n\n${HELP}`);
}
const { values } = parsed;

if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

function int(name: string, value: string | undefined, min: number, max: number): number {
  const n = Number(value);
  if (value === undefined || !Number.isInteger(n) || n < min || n > max) fail(`--${name} must be an integer ${min}..${max}`);
  return n;
}

const dialect = values.dialect;
if (dialect !== 'official' && dialect !== 'partner' && dialect !== 'both') fail('--dialect must be official, partner or both');
const dialects: SimDialect[] = dialect === 'both' ? ['official', 'partner'] : [dialect];
if (values['callback-url'] !== undefined) {
  try {
    new URL(values['callback-url']);
  } catch {
    fail('--callback-url must be a URL');
  }
}

const sim = await startViberSimulator({
  port: int('port', values.port, 0, 65535),
  dialects,
  callbackUrl: values['callback-url'],
  callbackToken: values['callback-token'],
  sharedSecret: values['shared-secret'],
  serviceIds: values['service-id']?.map((s) => int('service-id', s, 1, Number.MAX_SAFE_INTEGER)),
  apiKeys: values['api-key'],
  allowedCallers: values['allow-caller'],
  callbackDelayMs: int('callback-delay', values['callback-delay'], 0, 3_600_000),
  expireAfterMs: int('expire-after', values['expire-after'], 0, 3_600_000),
  callbackBatch: int('callback-batch', values['callback-batch'], 1, 1000),
  duplicateCallbacks: values.duplicates,
  reorderCallbacks: values.reorder,
});
process.stdout.write(`${JSON.stringify({ event: 'listening', url: sim.url, port: sim.port, dialects })}\n`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void sim.stop().then(() => process.exit(0));
  });
}
