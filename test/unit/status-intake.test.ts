import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StatusIntake } from '../../shared/engine/status-intake.js';
import { createLogger } from '../../shared/logger.js';
import type { StatusReport } from '../../shared/carriers/types.js';

const report = (attemptId: number): StatusReport => ({ attemptId, state: 'sent', resultInfo: 'Sent', at: 0 });
const logger = createLogger('silent');

test('reports that arrive while a batch is applied go together in the next batch, in order', async () => {
  const batches: number[][] = [];
  let release!: () => void;
  const first = new Promise<void>((resolve) => (release = resolve));
  const intake = new StatusIntake(async (reports) => {
    batches.push(reports.map((r) => r.attemptId!));
    if (batches.length === 1) {
      await first;
    }
  }, async () => assert.fail('nothing is queued'), logger, 1);
  const a = intake.push([report(1)]);
  await new Promise((resolve) => setTimeout(resolve, 10));
  const rest = [intake.push([report(2)]), intake.push([report(3), report(4)])];
  release();
  await Promise.all([a, ...rest]);
  assert.deepEqual(batches, [[1], [2, 3, 4]]);
});

test('a batch that cannot be applied is queued instead; push rejects only when both fail', async () => {
  const queued: number[][] = [];
  const intake = new StatusIntake(async () => {
    throw new Error('database busy');
  }, async (reports) => {
    if (reports.some((r) => r.attemptId === 9)) {
      throw new Error('redis down');
    }
    queued.push(reports.map((r) => r.attemptId!));
  }, logger, 0);
  await intake.push([report(5)]);
  assert.deepEqual(queued, [[5]]);
  await assert.rejects(intake.push([report(9)]), /redis down/);
});

test('batches stop at maxBatch reports without splitting one push', async () => {
  const sizes: number[] = [];
  const intake = new StatusIntake(async (reports) => {
    sizes.push(reports.length);
  }, async () => undefined, logger, 1, 3);
  await Promise.all([intake.push([report(1), report(2)]), intake.push([report(3), report(4)]), intake.push([report(5)])]);
  await intake.flush();
  assert.deepEqual(sizes, [2, 3]);
});
