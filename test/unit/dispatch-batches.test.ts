/**
 * Dispatch jobs taken together (shared/engine/dispatch-batches.ts): which waiting runs go in the
 * next batch, and when batches start, succeed and fail. The batch runner here is a function that
 * records what it was given and settles when told; `dispatchRuns` itself, with Postgres, is
 * covered by test/api/dispatch-batches.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DispatchBatcher, takeBatch } from '../../shared/engine/dispatch-batches.js';
import type { DispatchOutcome, DispatchRun } from '../../shared/engine/dispatch.js';

const run = (name: string, step: number, recipients: number): DispatchRun => ({
  job: { step, messages: [{ messageId: name, recipientIds: Array.from({ length: recipients }, (_, i) => i + 1) }] },
  delaySelf: false,
});
const waiting = (name: string, step: number, recipients: number, alone = false) => ({ run: run(name, step, recipients), recipients, alone, name });

test('takeBatch: the oldest run, then later ones of its step while the recipients fit; the rest keep their order', () => {
  const cases: Array<[what: string, queue: ReturnType<typeof waiting>[], max: number, batch: string[], left: string[]]> = [
    ['one run', [waiting('a', 0, 100)], 500, ['a'], []],
    ['runs of one step up to the bound', [waiting('a', 0, 100), waiting('b', 0, 300), waiting('c', 0, 100), waiting('d', 0, 100)], 500, ['a', 'b', 'c'], ['d']],
    ['a run that does not fit is skipped, a smaller one after it still goes', [waiting('a', 0, 300), waiting('b', 0, 300), waiting('c', 0, 200)], 500, ['a', 'c'], ['b']],
    ['a larger run than the bound goes alone when it is the oldest', [waiting('a', 0, 2000), waiting('b', 0, 10)], 500, ['a'], ['b']],
    ['runs of another step wait for a batch of their own', [waiting('a', 1, 1), waiting('b', 0, 100), waiting('c', 1, 1), waiting('d', 0, 100)], 500, ['a', 'c'], ['b', 'd']],
    ['a run marked alone goes alone', [waiting('a', 0, 100, true), waiting('b', 0, 100)], 500, ['a'], ['b']],
    ['a run marked alone is not taken into another batch', [waiting('a', 0, 100), waiting('b', 0, 100, true), waiting('c', 0, 100)], 500, ['a', 'c'], ['b']],
  ];
  for (const [what, queue, max, batch, left] of cases) {
    const taken = takeBatch(queue, max);
    assert.deepEqual(taken.map((w) => w.name), batch, what);
    assert.deepEqual(queue.map((w) => w.name), left, `${what}: left waiting`);
  }
});

/** A batch runner the test drives: each call is recorded with the means to commit, resolve or fail it. */
function driven() {
  const calls: Array<{ names: string[]; commit: () => void; resolve: () => void; fail: (err: Error) => void }> = [];
  const runBatch = (runs: DispatchRun[], committed: () => void): Promise<DispatchOutcome[]> => new Promise((resolve, reject) => {
    calls.push({
      names: runs.map((r) => r.job.messages[0]!.messageId),
      commit: committed,
      resolve: () => resolve(runs.map((r) => ({ delayUntil: null, handed: r.job.messages[0]!.recipientIds.length, rejected: 0 }))),
      fail: reject,
    });
  });
  return { calls, runBatch };
}
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

test('a lone run starts at once; runs that arrive during its transaction go together once it committed', async () => {
  const { calls, runBatch } = driven();
  const batcher = new DispatchBatcher(runBatch, 500, 1);
  const a = batcher.run(run('a', 0, 100));
  assert.deepEqual(calls.map((c) => c.names), [['a']], 'no wait for a lone run');
  const b = batcher.run(run('b', 0, 100));
  const c = batcher.run(run('c', 0, 100));
  await turn();
  assert.equal(calls.length, 1, 'b and c wait while a reads and writes');
  calls[0]!.commit();
  assert.deepEqual(calls.map((x) => x.names), [['a'], ['b', 'c']], 'a committed: b and c go as one batch, beside a\'s hand-over');
  calls[1]!.commit();
  calls[1]!.resolve();
  calls[0]!.resolve();
  assert.deepEqual(await Promise.all([a, b, c]), [100, 100, 100].map((handed) => ({ delayUntil: null, handed, rejected: 0 })), 'each its own outcome');
});

test('a batch that fails before its commit runs its jobs again one by one; only the failing one fails', async () => {
  const { calls, runBatch } = driven();
  const batcher = new DispatchBatcher(runBatch, 500, 1);
  const first = batcher.run(run('first', 0, 1));
  const settled = ['a', 'b', 'c'].map((n) => batcher.run(run(n, 0, 1)).then(() => 'ok', (e: Error) => e.message));
  calls[0]!.commit();
  calls[0]!.resolve();
  await first;
  assert.deepEqual(calls[1]!.names, ['a', 'b', 'c']);
  const later = batcher.run(run('later', 0, 1));
  calls[1]!.fail(new Error('bad data in b'));
  await turn();
  assert.deepEqual(calls.slice(2).map((c) => c.names), [['a']], 'the first of them alone, ahead of the run that came later');
  calls[2]!.commit(); // a alone: fine
  calls[2]!.resolve();
  await turn();
  assert.deepEqual(calls[3]!.names, ['b']);
  calls[3]!.fail(new Error('bad data in b'));
  await turn();
  assert.deepEqual(calls[4]!.names, ['c']);
  calls[4]!.commit();
  calls[4]!.resolve();
  await turn();
  assert.deepEqual(calls[5]!.names, ['later'], 'then the run that waited behind them');
  calls[5]!.commit();
  calls[5]!.resolve();
  assert.deepEqual(await Promise.all(settled), ['ok', 'bad data in b', 'ok']);
  await later;
});

test('a batch that fails after its commit fails every job of it, without running them again', async () => {
  const { calls, runBatch } = driven();
  const batcher = new DispatchBatcher(runBatch, 500, 1);
  const first = batcher.run(run('first', 0, 1));
  const settled = ['a', 'b'].map((n) => batcher.run(run(n, 0, 1)).then(() => 'ok', (e: Error) => e.message));
  calls[0]!.commit();
  calls[0]!.resolve();
  await first;
  calls[1]!.commit();
  calls[1]!.fail(new Error('carrier link down'));
  assert.deepEqual(await Promise.all(settled), ['carrier link down', 'carrier link down']);
  assert.equal(calls.length, 2, 'BullMQ retries the jobs; the batcher does not');
});

test('batches in their transaction at once are bounded; a batch that fails or succeeds without a commit frees its place', async () => {
  const { calls, runBatch } = driven();
  const batcher = new DispatchBatcher(runBatch, 500, 2);
  const runs = ['a', 'b', 'c', 'd'].map((n) => batcher.run(run(n, 0, 400)).then(() => 'ok', (e: Error) => e.message));
  await turn();
  assert.deepEqual(calls.map((c) => c.names), [['a'], ['b']], 'two batches at once; 400 + 400 exceeds a batch');
  calls[0]!.resolve(); // nothing was due: done without a commit
  await turn();
  assert.deepEqual(calls.map((c) => c.names), [['a'], ['b'], ['c']]);
  calls[1]!.fail(new Error('down')); // a lone run fails: no second try here
  await turn();
  assert.deepEqual(calls.map((c) => c.names), [['a'], ['b'], ['c'], ['d']]);
  calls[2]!.resolve();
  calls[3]!.resolve();
  assert.deepEqual(await Promise.all(runs), ['ok', 'down', 'ok', 'ok']);
});

test('a runner that throws at once fails its batch like one that rejects', async () => {
  const batcher = new DispatchBatcher(() => {
    throw new Error('thrown');
  }, 500, 1);
  await assert.rejects(batcher.run(run('a', 0, 1)), /thrown/);
  await assert.rejects(batcher.run(run('b', 0, 1)), /thrown/, 'its place was freed');
});
