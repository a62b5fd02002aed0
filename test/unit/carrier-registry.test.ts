/** The route table: each connector kind's routes replace only its own; the sandbox is the explicit default route. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CarrierRegistry } from '../../shared/engine/routing.js';
import type { Carrier } from '../../shared/carriers/types.js';

const carrier = (name: string): Carrier => ({ name, send: async () => undefined, close: async () => undefined });
const a = carrier('smpp.a');
const b = carrier('smpp.b');
const env = carrier('smpp.default');
const wa = carrier('whatsapp.main');
const sandbox = carrier('sandbox');

test('prefix routes: longest prefix wins; on an equal prefix the route listed first; no route and no default is [303]', () => {
  const r = new CarrierRegistry();
  r.setPrefixRoutes('smpp', [
    { channel: 'sms', prefix: '420', carrier: a },
    { channel: 'sms', prefix: '4207', carrier: b },
    { channel: 'sms', prefix: '', carrier: env },
    { channel: 'sms', prefix: '', carrier: b },
  ]);
  const cases: Array<[string, Carrier]> = [['420777000000', b], ['420600000000', a], ['441234567890', env]];
  for (const [phone, expected] of cases) {
    assert.equal(r.route('sms', phone, 1, 'Shop').carrier, expected, phone);
  }
  r.setPrefixRoutes('smpp', [{ channel: 'sms', prefix: '420', carrier: a }]);
  assert.deepEqual(r.route('sms', '441234567890', 1, 'Shop'), { carrier: null, info: '[303] No route' });
});

test('a kind replaces only its own routes, and the sandbox catches what no route claims', () => {
  const r = new CarrierRegistry(new Set(['whatsapp']));
  r.setPrefixRoutes('smpp', [{ channel: 'sms', prefix: '420', carrier: a }]);
  r.setSenderRoutes('whatsapp', [{ family: 'whatsapp', accountId: 7, sender: '106540352242922', prefixes: [''], carrier: wa }]);
  r.setPrefixRoutes('other', [{ channel: 'sms', prefix: '44', carrier: b }]);
  assert.equal(r.route('sms', '420777000000', 7, 'Shop').carrier, a, 'smpp routes kept when another kind sets its own');
  assert.equal(r.route('sms', '447700900000', 7, 'Shop').carrier, b);
  r.setDefault(sandbox);
  assert.equal(r.route('sms', '15550000000', 7, 'Shop').carrier, sandbox);
  assert.equal(r.route('whatsapp_text', '420777000000', 7, '106540352242922').carrier, wa);
  assert.equal(r.route('whatsapp_template', '420777000000', 7, '106540352242922').carrier, wa, 'a family shares its sender rows');
  assert.equal(r.route('whatsapp_text', '420777000000', 8, '106540352242922').carrier, sandbox, 'another account: the sandbox while it is on');
  assert.deepEqual(new Set(r.carriers()), new Set([a, b, wa, sandbox]));
});

test('sender-routed families: only the account\'s sender row sends a step; without one it is [303] naming the sender', () => {
  const r = new CarrierRegistry(new Set(['whatsapp', 'viber']));
  r.setSenderRoutes('whatsapp', [{ family: 'whatsapp', accountId: 7, sender: 'pn1', prefixes: ['420'], carrier: wa }]);
  assert.equal(r.route('whatsapp_text', '420777000000', 7, 'pn1').carrier, wa);
  assert.deepEqual(r.route('whatsapp_text', '441234567890', 7, 'pn1'),
    { carrier: null, info: '[303] No route: sender "pn1" does not cover this destination' });
  assert.deepEqual(r.route('whatsapp_text', '420777000000', 7, 'pn2'), { carrier: null, info: '[303] No route: sender "pn2" is not registered for whatsapp' });
  assert.deepEqual(r.route('viber', '420777000000', 7, 'Shop'), { carrier: null, info: '[303] No route: sender "Shop" is not registered for viber' });
  r.setSenderRoutes('whatsapp', []);
  assert.equal(r.route('whatsapp_text', '420777000000', 7, 'pn1').carrier, null, 'routes replaced by an empty list');
});

test('catchUp asks the follower only when the stored version read is newer than the one the routes reflect', async () => {
  const r = new CarrierRegistry();
  await r.catchUp(5); // no follower (no connection manager in this process): nothing to re-read
  let applied = 3;
  const asked: number[] = [];
  r.followStoredConfig({ version: () => applied, catchUp: async (version) => { asked.push(version); applied = 5; } });
  const cases: Array<[number, number[]]> = [[2, []], [3, []], [4, [4]], [5, [4]], [6, [4, 6]]];
  for (const [read, expected] of cases) {
    await r.catchUp(read);
    assert.deepEqual(asked, expected, `version ${read}`);
  }
  r.followStoredConfig(null);
  await r.catchUp(9);
  assert.deepEqual(asked, [4, 6], 'a manager that closed is no longer asked');
});
