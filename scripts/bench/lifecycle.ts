/**
 * How a harness that starts child processes (the benchmark, the fault suite) ends: its cleanups run
 * last-registered first, once, whether it finishes, fails, or is interrupted (Ctrl-C, SIGTERM, a
 * closed terminal), and every child still registered in procs.ts is stopped after them.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopAll } from './procs.js';

export class Cleanups {
  private readonly fns: Array<() => Promise<void>> = [];
  private running: Promise<void> | null = null;

  constructor(private readonly log: (message: string) => void) {}

  /** Registers a cleanup; returns a function that unregisters it. */
  add(fn: () => Promise<void>): () => void {
    this.fns.push(fn);
    return () => {
      const i = this.fns.lastIndexOf(fn);
      if (i >= 0) {
        this.fns.splice(i, 1);
      }
    };
  }

  runAll(): Promise<void> {
    this.running ??= (async () => {
      while (this.fns.length > 0) {
        const fn = this.fns.pop()!;
        await fn().catch((err: unknown) => this.log(`cleanup failed: ${(err as Error).message}`));
      }
      await stopAll(5000);
    })();
    return this.running;
  }
}

/** Runs `main`, then the cleanups, and exits with its code (1 when it threw, 130 when interrupted). */
export function runHarness(main: () => Promise<number>, cleanups: Cleanups, log: (message: string) => void, what: string): void {
  let interrupted = false;
  const interrupt = (signal: string) => {
    if (interrupted) {
      return;
    }
    interrupted = true;
    log(`${signal}: stopping everything ${what} started`);
    void cleanups.runAll().then(() => process.exit(130));
  };
  process.on('SIGINT', () => interrupt('SIGINT'));
  process.on('SIGTERM', () => interrupt('SIGTERM'));
  process.on('SIGHUP', () => interrupt('SIGHUP')); // children run in sessions of their own (procs.ts): a closed terminal reaches only us
  process.on('unhandledRejection', (err) => {
    log(`unhandled rejection: ${(err as Error)?.stack ?? String(err)}`);
  });
  main().then(
    async (code) => {
      await cleanups.runAll();
      process.exit(code);
    },
    async (err: unknown) => {
      log(`failed: ${(err as Error)?.stack ?? String(err)}`);
      await cleanups.runAll();
      process.exit(1);
    },
  );
}

/** The repository root: the nearest directory above this file (sources or dist/) with a package.json. */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) {
      throw new Error('cannot find the repository root (package.json)');
    }
    dir = up;
  }
  return dir;
}
