/** Which pending webhook batches the recovery sweep queues (shared/webhooks/holders.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { batchesToQueue, holdersToCheck, type PendingBatch } from '../../shared/webhooks/holders.js';

const batch = (id: number, holder: string | null, stale: boolean): PendingBatch => ({ id, url: 'http://receiver.example/hook', holder, stale });

test('batchesToQueue: stale batches always, others only when their holder is gone', () => {
  const cases: Array<{ name: string; batch: PendingBatch; live: string[]; queued: boolean }> = [
    { name: 'stale, live holder', batch: batch(1, 'a', true), live: ['a'], queued: true },
    { name: 'stale, gone holder', batch: batch(2, 'b', true), live: ['a'], queued: true },
    { name: 'stale, no holder (a job stands for it)', batch: batch(3, null, true), live: [], queued: true },
    { name: 'recent, live holder', batch: batch(4, 'a', false), live: ['a'], queued: false },
    { name: 'recent, gone holder', batch: batch(5, 'b', false), live: ['a'], queued: true },
    { name: 'recent, no holder', batch: batch(6, null, false), live: [], queued: false },
  ];
  for (const c of cases) {
    assert.equal(batchesToQueue([c.batch], new Set(c.live)).length === 1, c.queued, c.name);
  }
});

test('holdersToCheck: each holder of a batch that is not stale, once', () => {
  const batches = [batch(1, 'a', false), batch(2, 'a', false), batch(3, 'b', true), batch(4, null, false), batch(5, 'c', false)];
  assert.deepEqual(holdersToCheck(batches), ['a', 'c']);
  assert.deepEqual(holdersToCheck([]), []);
});
