/** Command line of `npm run test:faults` (scripts/faults/run.ts). */
import { parseArgs } from 'node:util';
import { INFRA_FAULTS, type FaultTiming } from './plan.js';

export interface FaultOptions {
  short: boolean;
  recipients: number;
  seed: number;
  /** Fault names (Procfile roles and INFRA_FAULTS); null = every one. */
  faults: string[] | null;
  concurrency: number;
  priorityIntervalMs: number;
  /** The Redis fault loses the AOF's last this many ms of writes (0: a plain kill -9, which loses nothing written). */
  redisLossMs: number;
  /** The simulator's delay before a receipt. */
  receiptDelayMs: number;
  /** Form of the SMSC simulator's message ids. */
  smscIds: 'hex' | 'decimal';
  timing: FaultTiming;
  /** Priority messages keep coming this long after the last fault was undone. */
  tailMs: number;
  /** A burst of campaign calls starts this long before each fault. */
  burstLeadMs: number;
  /** Waiting for the system to settle: at most this long, and not longer than `settleStallMs` without progress. */
  settleMs: number;
  settleStallMs: number;
  build: boolean;
  keep: boolean;
  out: string | null;
  maxMinutes: number;
}

export const USAGE = `usage: npm run test:faults -- [options]
  --short              the CI version: 3,000 recipients, shorter outages (~3-5 minutes)
  --recipients N       campaign recipients (default 20000; short 3000)
  --seed N             seed of the faults' order and timing (default: random, printed)
  --faults a,b,c       only these faults: Procfile roles (kill -9, then restart) and
                       ${INFRA_FAULTS.join(', ')} (default: all)
  --concurrency N      campaign calls in flight (default 4)
  --redis-loss MS      the Redis fault cuts the AOF back to its length MS before the kill, as a host
                       crash may with appendfsync everysec (default 1000; 0: kill -9 alone)
  --receipt-delay MS   the simulator sends a receipt this long after its submit_sm_resp (default 1000;
                       each submit_sm_resp comes 50 ms after its submit_sm)
  --smsc-ids hex|decimal  the simulator's message ids: hex (default; 00001234, whose decimal reading
                       names an older message) or decimal (1, 2, 3: the other reading names a newer one)
  --priority-interval MS  one priority message this often during the campaign (default 2000; short 1000)
  --settle S           wait at most S seconds for the system to settle (default 300; short 150)
  --no-build           use the existing dist/ (default: npm run build first)
  --keep               keep the run directory (logs, Postgres data, AOF) and print its path
  --out FILE           also write the results as JSON to FILE
  --max-minutes M      stop everything after M minutes (default 30; short 10)`;

function int(name: string, value: string | undefined, fallback: number, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) {
    return fallback;
  }
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`--${name} must be an integer from ${min} to ${max} (got "${value}")`);
  }
  return n;
}

export function parseFaultOptions(argv: string[]): FaultOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    options: {
      short: { type: 'boolean', default: false },
      recipients: { type: 'string' },
      seed: { type: 'string' },
      faults: { type: 'string' },
      concurrency: { type: 'string' },
      'smsc-ids': { type: 'string' },
      'redis-loss': { type: 'string' },
      'receipt-delay': { type: 'string' },
      'priority-interval': { type: 'string' },
      settle: { type: 'string' },
      'no-build': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      out: { type: 'string' },
      'max-minutes': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    return 'help';
  }
  const short = values.short === true;
  const faults = values.faults === undefined ? null : values.faults.split(',').map((f) => f.trim()).filter(Boolean);
  const timing: FaultTiming = short
    ? { firstAtMs: 6000, gapMs: [2000, 5000], killDownMs: [1000, 3000], redisDownMs: [1000, 3000], postgresDownMs: 10_000, smscDownMs: 3000, receiverDownMs: 20_000 }
    : { firstAtMs: 8000, gapMs: [4000, 10_000], killDownMs: [2000, 6000], redisDownMs: [2000, 5000], postgresDownMs: 15_000, smscDownMs: 5000, receiverDownMs: 60_000 };
  const smscIds = values['smsc-ids'] ?? 'hex';
  if (smscIds !== 'hex' && smscIds !== 'decimal') {
    throw new Error(`--smsc-ids must be hex or decimal (got "${smscIds}")`);
  }
  const settleS = int('settle', values.settle, short ? 150 : 300, 10, 3600);
  return {
    short,
    recipients: int('recipients', values.recipients, short ? 3000 : 20_000, 100, 999_999),
    seed: int('seed', values.seed, Math.floor(Math.random() * 1_000_000), 0, 2 ** 31 - 1),
    faults: faults && faults.length ? faults : null,
    concurrency: int('concurrency', values.concurrency, 4, 1, 64),
    smscIds,
    receiptDelayMs: int('receipt-delay', values['receipt-delay'], 1000, 0, 60_000),
    redisLossMs: int('redis-loss', values['redis-loss'], 1000, 0, 10_000),
    priorityIntervalMs: int('priority-interval', values['priority-interval'], short ? 1000 : 2000, 0, 60_000),
    timing,
    tailMs: short ? 5000 : 10_000,
    burstLeadMs: 2000,
    settleMs: settleS * 1000,
    settleStallMs: Math.min(settleS * 1000, short ? 75_000 : 120_000),
    build: values['no-build'] !== true,
    keep: values.keep === true,
    out: values.out ?? null,
    maxMinutes: int('max-minutes', values['max-minutes'], short ? 10 : 30, 1, 240),
  };
}
