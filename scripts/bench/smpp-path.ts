/**
 * The SMPP path alone, as worker_sms runs it minus Postgres: an SmppCarrier in this process,
 * bound to the benchmark's SMSC simulator (its own process, `smsc-child`), handed calls of 100
 * one-part attempts, 16 at a time (a dispatch pool's slots), at the benchmark's defaults
 * (`window=50&tps=100000`: the tps lease in Redis; learned id forms; decimal ids; receipts after
 * 100 ms). The sink counts reports and applies nothing. Prints this process's CPU and GC time per
 * recipient (submit, response, receipt) for each round, so a change to the carrier, session or PDU
 * code can be compared in alternating runs without the end-to-end benchmark's noise.
 *
 *   node --import tsx scripts/bench/smpp-path.ts [--recipients 50000] [--rounds 5] [--window 50]
 *
 * `--alloc`: also samples the allocations of the measured rounds (V8's sampling heap profiler,
 * collected objects included) and prints the bytes allocated per recipient: steadier than CPU time
 * on a machine whose speed moves, and what the garbage collector's share follows. `--alloc-profile
 * FILE` writes that profile (`.heapprofile`, for Chrome DevTools' Memory tab).
 *
 * Needs Redis (REDIS_URL, default redis://127.0.0.1:6379); keys under a fresh prefix, deleted after.
 */
import { Session } from 'node:inspector';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { SmppCarrier } from '../../shared/carriers/smpp/carrier.js';
import type { CarrierSink, StatusReport } from '../../shared/carriers/types.js';
import type { SmsAttempt } from '../../shared/channels/index.js';
import { planSms } from '../../shared/sms/gsm7.js';
import { spawnChild, stopChild } from './procs.js';

const { values } = parseArgs({
  options: {
    recipients: { type: 'string', default: '50000' },
    rounds: { type: 'string', default: '5' },
    window: { type: 'string', default: '50' },
    alloc: { type: 'boolean', default: false },
    'alloc-profile': { type: 'string' },
  },
  strict: true,
});
const RECIPIENTS = Number(values.recipients);
const ROUNDS = Number(values.rounds);
const CALL = 100;
const SLOTS = 16;
const here = fileURLToPath(import.meta.url);
/** The simulator beside this file: compiled (dist/) or run from source through tsx. */
const simulatorArgs = here.endsWith('.ts')
  ? ['--import', 'tsx', path.join(path.dirname(here), 'smsc-child.ts')]
  : [path.join(path.dirname(here), 'smsc-child.js')];

/** The simulator as the benchmark starts it (`spawnChild`: its output in a log file, a start timeout). */
async function startSimulator(): Promise<{ port: number; stop(): Promise<unknown> }> {
  const { child, ready } = await spawnChild<{ port: number }>({
    name: 'smsc simulator',
    args: [...simulatorArgs, '--receipt-delay', '100'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production' },
    cwd: path.resolve(path.dirname(here), here.endsWith('.ts') ? '../..' : '../../..'),
    logFile: path.join(tmpdir(), 'smpp-path-smsc.log'),
    ready: (line) => (line.startsWith('{"event":"listening"') ? (JSON.parse(line) as { port: number }) : null),
    readyTimeoutMs: 10_000,
  });
  return { port: ready.port, stop: () => stopChild(child, 5000) };
}

interface SamplingNode {
  selfSize: number;
  children: SamplingNode[];
}

/** V8's sampling heap profiler over this process, objects the GC collected included; `stop` gives the bytes sampled. */
async function startAllocationSampling(file: string | undefined): Promise<{ stop(): Promise<number> }> {
  const session = new Session();
  session.connect();
  const post = <T>(method: string, params?: object): Promise<T> =>
    new Promise((resolve, reject) => session.post(method, params, (err, result) => (err ? reject(err) : resolve(result as T))));
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', { samplingInterval: 8192, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  return {
    async stop(): Promise<number> {
      const { profile } = await post<{ profile: { head: SamplingNode } }>('HeapProfiler.stopSampling');
      session.disconnect();
      if (file) writeFileSync(file, JSON.stringify(profile));
      let bytes = 0;
      const stack = [profile.head];
      for (let node = stack.pop(); node; node = stack.pop()) {
        bytes += node.selfSize;
        stack.push(...node.children);
      }
      return bytes;
    },
  };
}

async function main(): Promise<void> {
  const sim = await startSimulator();
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const prefix = `smpp-path-${randomBytes(4).toString('hex')}`;
  let submitted = 0;
  let receipts = 0;
  let onReceipts: (() => void) | null = null;
  let target = 0;
  const sink: CarrierSink = {
    report: async (updates: StatusReport[]) => {
      for (const u of updates) {
        if (u.state === 'sent') submitted++;
        else if (u.state === 'delivered' || u.state === 'undelivered' || u.state === 'rejected') receipts++;
      }
      if (receipts >= target && onReceipts) onReceipts();
      return true;
    },
    inbound: async () => undefined,
  };
  const carrier = new SmppCarrier({
    connection: 'bench',
    url: `smpp://bench:secret@127.0.0.1:${sim.port}?window=${values.window}&tps=100000`,
    sink,
    redis,
    redisPrefix: prefix,
  }).start();
  await carrier.waitUntilBound(10_000);

  let gcMs = 0;
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration;
  });
  gcObserver.observe({ entryTypes: ['gc'] });

  const plan = planSms('Your code is 123456. Thanks for using switchboard.', 'utf');
  let nextId = 1;
  const round = async (recipients: number): Promise<{ usPerRecipient: number; gcUsPerRecipient: number; perS: number }> => {
    target = receipts + recipients;
    const allReceipts = new Promise<void>((resolve) => (onReceipts = resolve));
    const cpu0 = process.cpuUsage();
    const gc0 = gcMs;
    const t0 = performance.now();
    let left = recipients;
    const slot = async (): Promise<void> => {
      while (left > 0) {
        const n = Math.min(CALL, left);
        left -= n;
        const attempts: SmsAttempt[] = [];
        for (let i = 0; i < n; i++) {
          const attemptId = nextId++;
          attempts.push({
            attemptId, recipientPublicId: `r${attemptId}`, accountId: 1, channel: 'sms', smsGateway: 'high',
            // …10: DELIVRD (the simulator chooses the outcome by the last two digits).
            to: `4206${String(attemptId).padStart(7, '0')}10`,
            sender: 'Switchboard', text: plan.text, encoding: plan.encoding, parts: plan.parts, ttlMinutes: 60,
          });
        }
        await carrier.send(attempts);
      }
    };
    await Promise.all(Array.from({ length: SLOTS }, slot));
    await allReceipts;
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return {
      usPerRecipient: (cpu.user + cpu.system) / recipients,
      gcUsPerRecipient: ((gcMs - gc0) * 1000) / recipients,
      perS: Math.round((recipients / ms) * 1000),
    };
  };

  await round(Math.min(10_000, RECIPIENTS)); // warm-up: JIT, id forms learned
  const profileFile = values['alloc-profile'];
  const sampler = values.alloc || profileFile ? await startAllocationSampling(profileFile) : null;
  const results: Array<Awaited<ReturnType<typeof round>>> = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await round(RECIPIENTS);
    results.push(r);
    process.stdout.write(`round ${i + 1}: ${r.usPerRecipient.toFixed(1)} µs CPU per recipient (GC ${r.gcUsPerRecipient.toFixed(1)}), ${r.perS}/s\n`);
  }
  if (sampler) {
    const bytes = await sampler.stop();
    process.stdout.write(`allocated ${Math.round(bytes / (RECIPIENTS * ROUNDS))} bytes per recipient (sampled)\n`);
  }
  const sorted = results.map((r) => r.usPerRecipient).sort((a, b) => a - b);
  process.stdout.write(`median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} µs CPU per recipient; submitted ${submitted}, receipts ${receipts}\n`);
  gcObserver.disconnect();
  await carrier.close();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
  await sim.stop();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
