/**
 * The service on a Redis Cluster (issue 23): a real cluster of three masters (redis-server in
 * cluster mode on loopback ports, test/support/redis-cluster.ts), the service started with
 * REDIS_CLUSTER_NODES, SMS over SMPP to the SMSC simulator (a throughput cap, `auto` id forms: the
 * lease script, the id index script and the store's pipelines all run), receipts, webhooks, and
 * the verification API's start limits (its script and its MULTI). Every BullMQ key must be in its
 * queue's own slot; the queues must not all share one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Cluster } from 'ioredis';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { dispatchQueueName, statusQueueName, WEBHOOK_QUEUE } from '../../shared/queues.js';
import { admitStart, limitKeys } from '../../shared/verification/rate-limit.js';
import { SmppRedisStore } from '../../shared/carriers/smpp/redis-store.js';
import { getEach, keyGroup } from '../../shared/redis.js';
import { ttlTimersKey } from '../../shared/engine/ttl-timers.js';
import { rearmLostTimers } from '../../workers/recovery.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startRuntime, StartupError } from '../../services/runtime.js';
import { createTestDatabase, startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';
import { startRedisCluster, type OwnRedisCluster } from '../support/redis-cluster.js';

const T = { timeout: 30_000 };

let cluster: OwnRedisCluster;
let client: Cluster;
let sim: SmscSimulator;
let svc: TestService;
let receiver: Receiver;
let apiKey: string;

before(async () => {
  cluster = await startRedisCluster(3);
  client = new Cluster(cluster.nodes.map((n) => ({ host: n.split(':')[0]!, port: Number(n.split(':')[1]) })), { lazyConnect: true });
  await client.connect();
  // Hex ids that are all digits: with `auto` id forms the ids are indexed in Redis until the form is learned.
  sim = new SmscSimulator({ systemId: 'sb', password: 's3cret', receiptDelayMs: 30, firstId: 0x10000000 });
  const { port } = await sim.start();
  receiver = await startReceiver();
  svc = await startTestService({
    env: {
      REDIS_CLUSTER_NODES: cluster.env,
      SMPP_URL: `smpp://sb:s3cret@127.0.0.1:${port}?window=10&tps=400&enquire_link=1`,
      SANDBOX: '0',
      // The sweep only at start: a test below walks after a loss itself.
      RECOVERY_SWEEP_MS: '3600000',
    },
  });
  ({ apiKey } = await svc.createAccount());
});

after(async () => {
  await svc?.stop();
  await receiver?.close();
  await sim?.stop();
  client?.disconnect();
  await cluster?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Event = any;
const resultsOf = (id: string): string[] => receiver.events().filter((e: Event) => e.message_id === id).map((e: Event) => e.result);

/** Every key of the test's prefix on every master, with the node it is on. */
async function keysOfPrefix(): Promise<Array<{ key: string; node: string }>> {
  const out: Array<{ key: string; node: string }> = [];
  for (const node of client.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `*${svc.prefix}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) out.push({ key, node: `${node.options.host}:${node.options.port}` });
    } while (cursor !== '0');
  }
  return out;
}

describe('on a Redis Cluster of three masters', () => {
  it('runs on the cluster client', T, () => {
    assert.equal(svc.config.redisCluster?.nodes.length, 3);
    assert.equal(svc.runtime.redis.isCluster, true);
    assert.equal(svc.runtime.queues.cluster, true);
  });

  it('sends over SMPP, applies the receipts and delivers the webhooks: each recipient exactly its events', T, async () => {
    // Ending in 99: the simulator delivers (01-05 pick other outcomes).
    const phones = Array.from({ length: 40 }, (_, i) => `4207771${String(i).padStart(3, '0')}99`);
    const calls = await Promise.all([0, 10, 20, 30].map((from) => svc.request('POST', '/v2/message', {
      body: { body: 'Hello over a cluster', to: phones.slice(from, from + 10).map((phone_number) => ({ phone_number })), flow: [{ sms: { sender: 'Switchboard' } }], callback: receiver.url },
      headers: { 'x-api-key': apiKey },
    })));
    for (const call of calls) assert.equal(call.status, 200, call.text);
    // A priority message (its own lane and queue) of three parts (the store's per-part records).
    const otp = await svc.request('POST', '/v2/message', {
      body: { body: 'A'.repeat(150) + 'B'.repeat(150) + 'C'.repeat(100), tag: 'priority', to: [{ phone_number: '420777299999' }], flow: [{ sms: { sender: 'Switchboard' } }], callback: receiver.url },
      headers: { 'x-api-key': apiKey },
    });
    assert.equal(otp.status, 200, otp.text);
    const ids = [...calls.flatMap((c) => c.body.accepted), ...otp.body.accepted].map((a: { message_id: string }) => a.message_id);
    assert.equal(ids.length, 41);
    await waitFor(() => ids.every((id) => resultsOf(id).includes('delivered')), 20_000, 'every recipient delivered');
    await new Promise((r) => setTimeout(r, 300)); // a duplicate would arrive about now
    for (const id of ids) assert.deepEqual(resultsOf(id), ['sending', 'sent', 'delivered'], id);
    assert.equal(sim.submitted.filter((r) => r.destination_addr === '420777299999').length, 3, 'three parts, each submitted once');
    assert.equal(sim.submitted.length, 43, 'nothing submitted twice');
    const [charged] = await svc.sql<{ n: number }>("SELECT count(*)::int AS n FROM attempts WHERE state = 'delivered'");
    assert.equal(charged?.n, 41);
  });

  it('keeps each queue in a slot of its own and the SMPP connection\'s keys in its group', T, async () => {
    const keys = await keysOfPrefix();
    const slotOf = async (key: string) => Number(await client.cluster('KEYSLOT', key));
    const queues = [
      dispatchQueueName('sms', 'priority'), dispatchQueueName('sms', 'transactional'), dispatchQueueName('sms', 'promotional'),
      ...Array.from({ length: svc.config.concurrency.status }, (_, p) => statusQueueName(p)), WEBHOOK_QUEUE,
    ];
    const slots = new Set<number>();
    for (const queue of queues) {
      const tag = `{${svc.prefix}:${queue}}`;
      const own = keys.filter((k) => k.key.startsWith(`${tag}:${queue}:`));
      assert.ok(own.length > 0, `queue ${queue} has keys (${JSON.stringify(keys.slice(0, 5))})`);
      const ownSlots = new Set(await Promise.all(own.map((k) => slotOf(k.key))));
      assert.equal(ownSlots.size, 1, `every key of ${queue} in one slot`);
      slots.add([...ownSlots][0]!);
    }
    assert.ok(slots.size >= queues.length - 1, `the queues spread over slots (${slots.size} slots for ${queues.length} queues)`);
    // Every key the service wrote is in a hash-tag group: a queue's, an SMPP connection's, or a single key.
    const smpp = keys.filter((k) => k.key.startsWith(`{${svc.prefix}:smpp:default}:`));
    assert.deepEqual(keys.filter((k) => k.key.includes(':smpp:') && !k.key.startsWith('{')).map((k) => k.key), [], 'no SMPP key outside its connection\'s group (the tps lease book included, while it holds leases)');
    // (Accepted parts are forgotten once their hand-over is committed: the next test writes them.)
    assert.ok(smpp.some((k) => /:idform:/.test(k.key)), 'the learned id form is in the connection\'s group');
    assert.equal(new Set(await Promise.all(smpp.map((k) => slotOf(k.key)))).size, 1, 'one slot for the connection');
    assert.ok(new Set(keys.map((k) => k.node)).size >= 2, 'the service\'s keys are on more than one master');
  });

  it('runs the SMPP store\'s script, pipelines and MGETs in the connection\'s slot; getEach reads keys of several slots', T, async () => {
    // What the service's own configuration does not reach in a short run: the id index script
    // (sinks without matchRefs), a re-hand's read of accepted parts (HMGET, MGET, HGETALL in one pipeline).
    const store = new SmppRedisStore(client, keyGroup(client, `${svc.prefix}:smpp:direct`));
    store.idFormKey = `${keyGroup(client, `${svc.prefix}:smpp:direct`)}:idform:abc`;
    await Promise.all([0, 1, 2].map((part) => store.recordAccepted({ attemptId: 5000, part, ref: `hex:5000${part}`, index: true, idTtlSeconds: 60 })));
    await store.recordWritten(5001, 0);
    const accepted = await store.acceptedParts([{ attemptId: 5000, partCount: 3 }, { attemptId: 5001, partCount: 2 }]);
    assert.deepEqual([...accepted.get(5000)!.parts], [[0, 'hex:50000'], [1, 'hex:50001'], [2, 'hex:50002']]);
    assert.deepEqual([...accepted.get(5001)!.unanswered], [0]);
    const looked = await store.lookupIds(['hex:50000', 'hex:50002', 'hex:59999']);
    assert.deepEqual([looked.idForm, [...looked.indexed].sort()], [null, ['hex:50000', 'hex:50002']]);
    assert.deepEqual(await store.addMoPart('m1', 1, 'a', 2), null);
    assert.equal((await store.addMoPart('m1', 2, 'b', 2))?.size, 2);
    // Without the connection's tag the same pipeline is refused by the cluster.
    const untagged = new SmppRedisStore(client, `${svc.prefix}:smpp:direct`);
    await assert.rejects(untagged.acceptedParts([{ attemptId: 5000, partCount: 3 }]), /CROSSSLOT|same slot|slots allocation/i);

    const keys = Array.from({ length: 12 }, (_, i) => `${svc.prefix}:wa:acc:${9000 + i}`);
    await Promise.all(keys.map((key, i) => client.set(key, `wamid.${i}`, 'EX', 60)));
    assert.deepEqual(await getEach(client, [...keys, `${svc.prefix}:wa:acc:none`]), [...keys.map((_, i) => `wamid.${i}`), null]);
    await assert.rejects(client.mget(...keys), /CROSSSLOT/);
  });

  it('keeps the ttl timers\' mark and the walk after a loss in the timers\' slot (its MULTI and script)', T, async () => {
    const timers = svc.runtime.engine.ttlTimers;
    // The service's first sweep marked the set (on the cluster client).
    await waitFor(async () => { const state = await timers.lossState(); return !state.lost && state.rearm === null; }, 5000, 'the mark');
    const set = ttlTimersKey(svc.prefix);
    const kept = `{${set}}:kept`;
    assert.equal(await client.exists(kept), 1);
    assert.equal(Number(await client.cluster('KEYSLOT', kept)), Number(await client.cluster('KEYSLOT', set)), 'the mark is in the set\'s slot');
    // A node that lost its data: the walk starts (the script), records progress and ends.
    await client.del(kept);
    const walk = await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 5000 });
    assert.equal(walk?.done, true);
    assert.deepEqual(await timers.lossState(), { lost: false, rearm: null });
    // The next sweep notes the node that holds the set (INFO in a script on the set's slot).
    assert.equal(await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 5000 }), null);
    const server = `{${set}}:server`;
    assert.match(String(await client.hget(server, 'run')), /^[0-9a-f]{40}$/);
    assert.equal(Number(await client.cluster('KEYSLOT', server)), Number(await client.cluster('KEYSLOT', set)), 'the record is in the set\'s slot');
    // Another node held it before (a failover): a walk over the recent attempts.
    await client.hset(server, 'run', 'an earlier node');
    const after = await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 5000 });
    assert.deepEqual([after?.cause, after?.done], ['server', true]);
    assert.match(String(await client.hget(server, 'run')), /^[0-9a-f]{40}$/);
  });

  it('applies the verification start limits: 10 of 30 concurrent starts, 1 of 10 on one number; a released start frees its slots', T, async () => {
    const { accountId, apiKey: key } = await svc.createAccount();
    await svc.admin('PATCH', `/accounts/${accountId}`, { verify_account_per_min: 10 });
    const start = (phoneNumber: string, k = key) => svc.request('POST', '/v1/validations', { body: { phoneNumber }, headers: { 'x-api-key': k } });
    const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => start(`4207772${String(i).padStart(5, '0')}`)));
    assert.equal(burst.filter((r) => r.status === 200).length, 10, JSON.stringify(burst.filter((r) => r.status !== 200 && r.status !== 429).map((r) => r.text)));
    assert.deepEqual([...new Set(burst.filter((r) => r.status === 429).map((r) => r.body.error))], ['TENANT_RATE_LIMIT']);
    assert.equal(burst.filter((r) => r.status === 429).length, 20);

    const other = await svc.createAccount();
    const one = await Promise.all(Array.from({ length: 10 }, () => start('420777300001', other.apiKey)));
    assert.equal(one.filter((r) => r.status === 200).length, 1);
    assert.deepEqual([...new Set(one.filter((r) => r.status === 429).map((r) => r.body.error))], ['PHONE_RATE_LIMIT']);

    // An admitted start that fails afterwards gives its slot back: MULTI over both keys, one slot.
    const admitted = await admitStart(svc.runtime.redis, svc.prefix, 999_999, '420777300002', { accountPerMin: 5, phonePerHour: 5, phoneCooldownS: 30 });
    assert.equal(admitted.admitted, true);
    const [accountKey, phoneKey] = limitKeys(svc.prefix, 999_999, '420777300002');
    assert.equal(Number(await client.cluster('KEYSLOT', accountKey)), Number(await client.cluster('KEYSLOT', phoneKey)));
    assert.deepEqual([await client.zcard(accountKey), await client.zcard(phoneKey)], [1, 1]);
    if (admitted.admitted) await admitted.release();
    assert.deepEqual([await client.zcard(accountKey), await client.zcard(phoneKey)], [0, 0]);
  });
});

describe('a Redis Cluster that cannot be reached', () => {
  it('stops the start, without hanging, with a message naming the nodes and the variable', T, async () => {
    const db = await createTestDatabase();
    try {
      const config = loadConfig({ NODE_ENV: 'test', PORT: '0', DATABASE_URL: db.url, REDIS_CLUSTER_NODES: '127.0.0.1:1,127.0.0.1:2', LOG_LEVEL: 'silent' });
      const started = Date.now();
      await assert.rejects(startRuntime({ role: 'all', config, logger: createLogger('silent') }), (err: unknown) =>
        err instanceof StartupError && /Cannot reach Redis at the Redis Cluster of 127\.0\.0\.1:1, 127\.0\.0\.1:2/.test(err.message) && /REDIS_CLUSTER_NODES/.test(err.message));
      assert.ok(Date.now() - started < 20_000, `gave up after ${Date.now() - started} ms (migrations included)`);
    } finally {
      await db.drop();
    }
  });
});
