/** Key names on one Redis and on a Redis Cluster (issue 23): hash tags on a cluster only. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keyGroup } from '../../shared/redis.js';
import { dispatchQueueName, queuePrefix, statusQueueName } from '../../shared/queues.js';
import { limitKeys } from '../../shared/verification/rate-limit.js';

test('one Redis: the names every earlier version wrote (delayed jobs, SMPP refs and counters outlive an upgrade)', () => {
  assert.equal(queuePrefix('sb', dispatchQueueName('sms', 'priority'), false), 'sb');
  assert.equal(queuePrefix('sb', statusQueueName(2), false), 'sb');
  assert.equal(keyGroup(false, 'sb:smpp:default'), 'sb:smpp:default');
});

test('a Redis Cluster: a hash tag per queue and per group of keys used together', () => {
  assert.equal(queuePrefix('sb', dispatchQueueName('sms', 'priority'), true), '{sb:sms.priority}');
  assert.equal(queuePrefix('sb', 'webhooks', true), '{sb:webhooks}');
  assert.equal(keyGroup(true, 'sb:smpp:default'), '{sb:smpp:default}');
  assert.equal(keyGroup({ isCluster: true } as never, 'x'), '{x}');
  assert.equal(keyGroup({ isCluster: false } as never, 'x'), 'x');
  // The verification limits always carried the account as their tag (both keys of its script).
  const [account, phone] = limitKeys('sb', 42, '420777123456');
  assert.equal(/\{(.*?)\}/.exec(account)?.[1], '42');
  assert.equal(/\{(.*?)\}/.exec(phone)?.[1], '42');
});
