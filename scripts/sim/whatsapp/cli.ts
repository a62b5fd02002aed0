/**
 * WhatsApp Graph simulator CLI (behaviour: scripts/sim/whatsapp/simulator.ts).
 * `npm run sim:whatsapp -- --help`. Prints one JSON line when listening, then runs until SIGINT/SIGTERM.
 */
import { parseArgs } from 'node:util';
import { loadSeed } from './seed.js';
import { startWhatsappSimulator, type WhatsappSimulatorOptions } from './simulator.js';

const HELP = `WhatsApp Cloud API (Graph) simulator on 127.0.0.1

Usage: npm run sim:whatsapp -- [options]

  --port N               listen port (default 8790; 0 = any free port)
  --callback-url URL     where webhooks go (the service's /callbacks/whatsapp/<connection>);
                         Meta's GET handshake is performed at start and must succeed
  --no-verify            skip the handshake at start (POST /_sim/verify does it later)
  --seed FILE            JSON seed (app, businesses, wabas, numbers, templates, tokens, signup);
                         default: the built-in seed (scripts/sim/whatsapp/seed.ts)
  --callback-delay MS    delay before the first status and between statuses (default 10)
  --duplicate-statuses   send every status twice, in separate POSTs
  --out-of-order         send a message's statuses last first
  --bad-signature        sign webhooks with a wrong key
  --window-sync          free text outside the 24-hour window: 400 131047 at once
  --no-window            do not enforce the 24-hour window
  --help                 this text

Outcomes by the recipient's last two digits: 01 sent+failed 131026, 02 HTTP 500 131000,
03 sent only, 04 failed 131026, 05 400 131021, 06 400 130429 twice then ok, 07 400 131056,
08 sent+read, 09 failed 131042, other sent+delivered+read.
Control: POST /_sim/inbound, GET /_sim/messages?to=, POST /_sim/reset, GET /_sim/codes (a fresh code; ?list=1),
POST /_sim/verify, GET /_sim/state, POST /_sim/config, GET /_sim/webhooks, GET /_sim/sdk.js.
`;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      help: { type: 'boolean', default: false },
      port: { type: 'string', default: '8790' },
      'callback-url': { type: 'string' },
      'no-verify': { type: 'boolean', default: false },
      seed: { type: 'string' },
      'callback-delay': { type: 'string', default: '10' },
      'duplicate-statuses': { type: 'boolean', default: false },
      'out-of-order': { type: 'boolean', default: false },
      'bad-signature': { type: 'boolean', default: false },
      'window-sync': { type: 'boolean', default: false },
      'no-window': { type: 'boolean', default: false },
    },
    strict: true,
  }));
} catch (err) {
  fail(`${(err as Error).message}\n\n${HELP}`);
}

if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail('--port must be an integer 0..65535');
const delay = Number(values['callback-delay']);
if (!Number.isInteger(delay) || delay < 0) fail('--callback-delay must be a non-negative integer');

const opts: WhatsappSimulatorOptions = {
  port,
  callbackDelayMs: delay,
  verifyOnStart: !values['no-verify'],
  duplicateStatuses: values['duplicate-statuses'],
  outOfOrder: values['out-of-order'],
  badSignature: values['bad-signature'],
  windowErrorSync: values['window-sync'],
  enforceWindow: !values['no-window'],
};
if (values['callback-url']) opts.callbackUrl = values['callback-url'];
try {
  if (values.seed) opts.seed = loadSeed(values.seed);
} catch (err) {
  fail((err as Error).message);
}

const sim = await startWhatsappSimulator(opts).catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
process.stdout.write(`${JSON.stringify({ event: 'listening', url: sim.url, port: sim.port, callbackUrl: opts.callbackUrl ?? null, appId: sim.seed.app.id })}\n`);

const shutdown = (): void => {
  void sim.stop().then(() => process.exit(0));
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
