import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { countAccepted, countAttemptResult, metricsRegistry, scrape, trackCarrierWindow, trackLargeCallTurns } from '../../shared/metrics.js';
import { LargeCallTurns } from '../../shared/sending/large-call-turns.js';
import { CarrierHttpClient } from '../../shared/carriers/http-client.js';
import { parseExposition, total } from '../support/exposition.js';

const families = async () => parseExposition(await metricsRegistry().metrics());

test('plain counters become Prometheus counters on scrape; unknown channels or states are ignored', async () => {
  const before = await families();
  countAttemptResult('viber', 'seen');
  countAttemptResult('viber', 'seen');
  countAttemptResult('fax', 'seen');
  countAccepted('xml', 7);
  const after = await families();
  const delta = (name: string, labels: Record<string, string>) => total(after, name, labels) - total(before, name, labels);
  assert.equal(delta('switchboard_attempts_total', { channel: 'viber', result: 'seen' }), 2);
  assert.equal(delta('switchboard_recipients_accepted_total', { api: 'xml' }), 7);
  assert.ok(!after.get('switchboard_attempts_total')!.samples.some((s) => s.labels.channel === 'fax'));
});

test('carrier windows are read on scrape until untracked', async () => {
  let inUse = 3;
  const untrack = trackCarrierWindow('smpp', 'unit', () => ({ size: 10, inUse }));
  assert.equal(total(await families(), 'switchboard_carrier_window', { connection: 'unit', measure: 'in_use' }), 3);
  inUse = 5;
  assert.equal(total(await families(), 'switchboard_carrier_window', { connection: 'unit', measure: 'in_use' }), 5);
  untrack();
  assert.ok(!(await families()).get('switchboard_carrier_window')!.samples.some((s) => s.labels.connection === 'unit'));
});

test('large-call turns are read on scrape: wide until a small call, then narrow, until untracked', async () => {
  const turns = new LargeCallTurns({ narrow: 2, wide: 4, quietMs: 60_000 }, 1 << 20);
  const untrack = trackLargeCallTurns(() => ({ size: turns.limit, inUse: turns.running, waitingBytes: turns.waiting }));
  const measure = async (m: string) => total(await families(), 'switchboard_accept_large_call_turns', { measure: m });
  assert.equal(await measure('size'), 4);
  let release!: () => void;
  const running = turns.run(10, () => new Promise<void>((resolve) => (release = resolve)));
  assert.equal(await measure('in_use'), 1);
  turns.smallCall();
  assert.equal(await measure('size'), 2);
  release();
  await running;
  assert.equal(await measure('in_use'), 0);
  untrack();
  assert.deepEqual((await families()).get('switchboard_accept_large_call_turns')!.samples, []);
});

test('HTTP carriers time one send in 16, labelled by kind and connection', async () => {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = new CarrierHttpClient(`http://${host}/v1`);
  try {
    for (let i = 0; i < 17; i++) await client.request('POST', '/messages', { json: { i } });
    await client.request('GET', '/status');
    assert.equal(total(await families(), 'switchboard_carrier_submit_seconds', { kind: 'http', connection: host }, 'switchboard_carrier_submit_seconds_count'), 2);
  } finally {
    await client.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('a scrape asks for METRICS_TOKEN when one is set', async () => {
  assert.equal((await scrape(undefined, 'metrics-token-0123456789')).status, 401);
  assert.equal((await scrape('Bearer nope', 'metrics-token-0123456789')).status, 401);
  // The scheme's name in any case (RFC 9110 11.1), as the admin API takes it; never basic.
  assert.equal((await scrape('bearer metrics-token-0123456789', 'metrics-token-0123456789')).status, 200);
  assert.equal((await scrape(`Basic ${Buffer.from('x:metrics-token-0123456789').toString('base64')}`, 'metrics-token-0123456789')).status, 401);
  const ok = await scrape('Bearer metrics-token-0123456789', 'metrics-token-0123456789');
  assert.equal(ok.status, 200);
  assert.match(ok.contentType, /^text\/plain; version=0\.0\.4/);
  assert.equal((await scrape(undefined, null)).status, 200);
});
