import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BoundedTurns, Semaphore, TurnsFullError } from '../../shared/semaphore.js';

/** A call that runs until released, recording when it started. */
function held(log: string[], name: string): { fn: () => Promise<string>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return { fn: async () => { log.push(name); await gate; return name; }, release };
}

test('Semaphore: at most `limit` at once, the rest in arrival order', async () => {
  const log: string[] = [];
  const turns = new Semaphore(1);
  const a = held(log, 'a');
  const b = held(log, 'b');
  const pa = turns.run(a.fn);
  assert.equal(turns.full, true);
  const pb = turns.run(b.fn);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a']);
  a.release();
  assert.equal(await pa, 'a');
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a', 'b']);
  b.release();
  assert.equal(await pb, 'b');
  assert.equal(turns.full, false);
});

test('BoundedTurns: a call that would wait beyond the byte budget is refused; free turns always run', async () => {
  const log: string[] = [];
  const turns = new BoundedTurns(1, 100);
  const big = held(log, 'big');
  const running = turns.run(500, big.fn); // a free turn: runs whatever its size
  assert.equal(turns.waiting, 0);
  const w1 = held(log, 'w1');
  const w2 = held(log, 'w2');
  const p1 = turns.run(60, w1.fn);
  assert.equal(turns.waiting, 60);
  await assert.rejects(turns.run(41, async () => 'never'), (err: unknown) => err instanceof TurnsFullError && err.waitingBytes === 60);
  const p2 = turns.run(40, w2.fn); // exactly at the budget
  assert.equal(turns.waiting, 100);
  big.release();
  assert.equal(await running, 'big');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(turns.waiting, 40, 'w1 took the turn: its bytes no longer wait');
  w1.release();
  await p1;
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(turns.waiting, 0);
  w2.release();
  await p2;
  assert.deepEqual(log, ['big', 'w1', 'w2'], 'never ran the refused call');
});

test('BoundedTurns: a failing call gives its turn and its bytes back', async () => {
  const turns = new BoundedTurns(1, 10);
  await assert.rejects(turns.run(5, async () => { throw new Error('boom'); }), /boom/);
  assert.equal(turns.waiting, 0);
  assert.equal(await turns.run(5, async () => 'next'), 'next');
});
