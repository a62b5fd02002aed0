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

test('Semaphore.setLimit: more turns let waiting callers in at once; fewer wait for running calls to end', async () => {
  const log: string[] = [];
  const turns = new Semaphore(1);
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => held(log, n)) as [ReturnType<typeof held>, ReturnType<typeof held>, ReturnType<typeof held>, ReturnType<typeof held>];
  const pa = turns.run(a.fn);
  const pb = turns.run(b.fn);
  const pc = turns.run(c.fn);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a']);
  turns.setLimit(3);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a', 'b', 'c'], 'both waiting callers started when the turns grew');
  assert.equal(turns.running, 3);
  turns.setLimit(1);
  assert.equal(turns.running, 3, 'no running call is interrupted');
  const pd = turns.run(d.fn);
  a.release();
  await pa;
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(turns.running, 2, 'a gave its turn up rather than passing it on: 2 still run against 1 turn');
  assert.deepEqual(log, ['a', 'b', 'c']);
  b.release();
  await pb;
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a', 'b', 'c'], 'c alone holds the one turn: d waits');
  c.release();
  await pc;
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(log, ['a', 'b', 'c', 'd'], 'the turn passed to d once c ended');
  assert.equal(turns.running, 1);
  d.release();
  await pd;
  assert.equal(turns.running, 0);
});
