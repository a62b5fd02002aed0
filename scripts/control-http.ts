/** JSON in and out for the simulators' small control servers (scripts/smsc.ts, scripts/bench/smsc-child.ts, scripts/faults/smsc-child.ts), and how their child processes follow the harness. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const MAX_BODY = 64 * 1024;

export function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      try {
        const text = Buffer.concat(chunks).toString('utf8');
        const parsed: unknown = text.trim() === '' ? {} : JSON.parse(text);
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('body must be a JSON object');
        resolve(parsed as Record<string, unknown>);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    req.on('error', reject);
  });
}

export function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}


/**
 * Runs a simulator as a harness's child process: starts it, serves `handle` on a control port
 * (127.0.0.1), prints `{"event":"listening","host","port","controlPort"}`, and stops on SIGINT /
 * SIGTERM or when stdin closes (the harness holds it open; when the harness goes away, even killed,
 * so does the child).
 */
export function runSimulatorChild(
  sim: { start(): Promise<{ host: string; port: number }>; stop(): Promise<void> },
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>,
): void {
  const main = async () => {
    const { host, port } = await sim.start();
    const control = http.createServer((req, res) => {
      handle(req, res).catch((err: unknown) => send(res, 400, { error: err instanceof Error ? err.message : String(err) }));
    });
    await new Promise<void>((resolve, reject) => {
      control.once('error', reject);
      control.listen(0, host, () => resolve());
    });
    const controlPort = (control.address() as AddressInfo).port;
    process.stdout.write(`${JSON.stringify({ event: 'listening', host, port, controlPort })}\n`);
    exitWithParent(() => {
      control.closeAllConnections();
      control.close();
      return sim.stop();
    });
  };
  runChildMain(main);
}

/**
 * A harness's child process stops on SIGINT / SIGTERM or when stdin closes (the harness holds it
 * open; when the harness goes away, even killed, so does the child): `stop` once, then exit (at
 * the latest after 3 s).
 */
export function exitWithParent(stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = (): void => {
    if (stopping) return;
    stopping = true;
    void stop().then(() => process.exit(0));
    setTimeout(() => process.exit(0), 3000).unref();
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  process.stdin.on('end', shutdown);
  process.stdin.on('error', shutdown);
  process.stdin.resume();
}

/** Runs a child's main; a failure is one line on stderr and exit code 1. */
export function runChildMain(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
