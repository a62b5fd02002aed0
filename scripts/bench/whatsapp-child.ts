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
    webhooks: { concurrency: 32, maxQueued: 100_000 },
  });
  process.stdout.write(`${JSON.stringify({ event: 'listening', url: sim.url })}\n`);
  let stopping = false;
  const shutdown = (): void => {
    if (stopping) return;
    stopping = true;
    void sim.stop().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 3000).unref();
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
