/**
 * One sending process for tests that need several (the tps cap is shared across processes): an
 * SmppCarrier bound to the simulator, with its own Redis connection and a sink that only counts.
 * Prints `{"event":"bound"}` once bound, sends SENDER_COUNT one-part attempts (one `send()`, as a
 * dispatch job hands a batch) when a line arrives on stdin, then prints
 * `{"event":"done", …stats, takes}` (`takes`: when each tps token was taken, epoch ms) and exits.
 *
 * Environment: SMPP_URL, REDIS_URL, REDIS_PREFIX, SENDER_CONNECTION (connection name, shared by
 * the processes of one test), SENDER_COUNT, SENDER_FIRST_ATTEMPT (attempt ids from here),
 * SENDER_TO (destination prefix; the attempt's index and 03 are appended).
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { SmppCarrier } from '../../shared/carriers/smpp/carrier.js';
import type { CarrierSink } from '../../shared/carriers/types.js';
import type { SmsAttempt } from '../../shared/channels/index.js';
import { planSms } from '../../shared/sms/gsm7.js';
import type { RedisTokenBucket } from '../../shared/carriers/smpp/token-bucket.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const count = Number(env('SENDER_COUNT'));
const first = Number(env('SENDER_FIRST_ATTEMPT'));
const to = env('SENDER_TO');
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
let reports = 0;
const sink: CarrierSink = {
  report: async (updates) => {
    reports += updates.length;
  },
  inbound: async () => undefined,
};
const carrier = new SmppCarrier({
  connection: env('SENDER_CONNECTION'),
  url: env('SMPP_URL'),
  sink,
  redis,
  redisPrefix: env('REDIS_PREFIX'),
}).start();

const print = (obj: object): void => {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
};

async function main(): Promise<void> {
  await carrier.waitUntilBound(10_000);
  print({ event: 'bound' });
  const lines = createInterface({ input: process.stdin });
  await new Promise<void>((resolve) => lines.once('line', () => resolve()));
  const attempts: SmsAttempt[] = [];
  for (let i = 0; i < count; i++) {
    const attemptId = first + i;
    const plan = planSms(`Cap ${attemptId}`, 'utf');
    attempts.push({
      attemptId, recipientPublicId: `r${attemptId}`, accountId: 1, channel: 'sms', smsGateway: 'high',
      to: `${to}${String(i).padStart(5, '0')}03`, // …03: the simulator sends no receipt
      sender: 'Switchboard', text: plan.text, encoding: plan.encoding, parts: plan.parts, ttlMinutes: 60,
    });
  }
  // When each token was taken (epoch ms): the times the cap is kept for, before any delay between
  // this process writing a PDU and the SMSC reading it.
  const bucket = (carrier as unknown as { bucket: RedisTokenBucket | null }).bucket;
  const takes: number[] = [];
  if (bucket) {
    const tryTake = bucket.tryTake.bind(bucket);
    bucket.tryTake = (): boolean => {
      const taken = tryTake();
      if (taken) takes.push(Date.now());
      return taken;
    };
  }
  const started = Date.now();
  await carrier.send(attempts);
  print({ event: 'done', ms: Date.now() - started, reports, bucket: bucket?.stats ?? null, carrier: carrier.stats, takes });
  lines.close();
  await carrier.close();
  redis.disconnect();
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
