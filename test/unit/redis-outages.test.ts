/** Redis outages in the log: one warn line when an outage starts, one info line when it ends, the errors between only counted. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RedisOutages, isConnectionError } from '../../shared/redis.js';
import type { Logger } from '../../shared/logger.js';

test('connection errors are told apart from failed commands', () => {
  const cases: Array<[unknown, boolean]> = [
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), true],
    [Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), true],
    [new Error('Connection is closed.'), true],
    [new Error("Stream isn't writeable and enableOfflineQueue options is false"), true],
    [new Error('None of startup nodes is available'), true],
    [new Error('CLUSTERDOWN The cluster is down'), true],
    [new Error('ERR unknown command'), false],
    [new Error("CROSSSLOT Keys in request don't hash to the same slot"), false],
    [new Error('NOSCRIPT No matching script'), false],
    [null, false],
  ];
  for (const [err, expected] of cases) assert.equal(isConnectionError(err), expected, String((err as Error | null)?.message));
});

test('an outage is one warn line and one info line, however many errors it makes', () => {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const logger = {
    warn: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', obj, msg }),
    info: (obj: Record<string, unknown>, msg: string) => lines.push({ level: 'info', obj, msg }),
  } as unknown as Logger;
  const outages = new RedisOutages(logger);
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
  outages.ready(); // no outage: nothing to say
  for (let i = 0; i < 42; i++) assert.equal(outages.error(i % 2 ? 'queue sms.priority' : 'worker status.0', refused), true);
  assert.equal(outages.error('queue x', new Error('ERR wrong type')), false, 'not a connection error: the caller logs it');
  outages.ready();
  outages.ready();
  assert.deepEqual(lines.map((l) => l.level), ['warn', 'info']);
  assert.equal(lines[0]!.obj.code, 'ECONNREFUSED');
  assert.equal(lines[1]!.obj.errors, 42);
  assert.deepEqual(lines[1]!.obj.sources, ['worker status.0', 'queue sms.priority']);
});
