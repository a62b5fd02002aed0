/**
 * The WhatsApp Graph simulator (scripts/sim/whatsapp) as a benchmark child process: it answers
 * the sends and posts the signed status webhooks to `--callback-url`, from its own event loop and
 * CPU. Driven over its own control endpoints (`/_sim/verify`, `/_sim/state`, `/_sim/reset`).
 * Exits when its stdin closes (the harness died) or on SIGTERM/SIGINT.
 *
 *   node dist/scripts/bench/whatsapp-child.js --callback-url http://127.0.0.1:8080/callbacks/whatsapp/bench
 *   → prints {"event":"listening","url":…}
 */
import { parseArgs } from 'node:util';
import { startWhatsappSimulator } from '../sim/whatsapp/simulator.js';
import { exitWithParent, runChildMain } from '../control-http.js';

const { values } = parseArgs({
  options: {
    'callback-url': { type: 'string' },
    'callback-delay': { type: 'string', default: '10' },
  },
  strict: true,
});

async function main(): Promise<void> {
  const sim = await startWhatsappSimulator({
    callbackUrl: values['callback-url'] ?? '',
    callbackDelayMs: Number(values['callback-delay']),
    // The connection is stored after this starts; the harness asks for the handshake then.
    verifyOnStart: false,
    // The harness reads nothing back from the sends: a short list keeps memory flat.
    maxMessages: 1000,
    // The kill run's check: no number sent twice beyond what a kill may repeat (GET /_sim/sends).
    countSends: true,
    webhooks: { concurrency: 32, maxQueued: 100_000 },
  });
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: sim.url })}\n`);
  exitWithParent(() => sim.stop());
}

runChildMain(main);
