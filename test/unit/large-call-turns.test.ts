import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LargeCallTurns, largeCallLimit, type LargeCallPolicy } from '../../shared/sending/large-call-turns.js';

const policy: LargeCallPolicy = { narrow: 2, wide: 4, quietMs: 60_000 };

test('largeCallLimit: narrow while a small call came within quietMs, wide otherwise', () => {
  const rows: Array<[string, number, number | null, number]> = [
    ['no small call since the start', 1_000_000, null, 4],
    ['a small call just now', 1_000_000, 1_000_000, 2],
    ['a small call 59.999 s ago', 1_000_000, 1_000_000 - 59_999, 2],
    ['a small call exactly quietMs ago', 1_000_000, 1_000_000 - 60_000, 4],
    ['a small call long ago', 1_000_000, 0, 4],
  ];
  for (const [name, now, last, want] of rows) assert.equal(largeCallLimit(policy, now, last), want, name);
  assert.equal(largeCallLimit({ narrow: 3, wide: 3, quietMs: 60_000 }, 10, null), 3, 'wide equal to narrow: no widening');
});

/** A large call that runs until released; `started` lists the names that got a turn. */
function heldCall(started: string[], name: string): { fn: () => Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  return { fn: async () => { started.push(name); await gate; }, release };
}
const turnOver = () => new Promise((resolve) => setImmediate(resolve));

test('LargeCallTurns: wide turns with bulk calls alone, narrow from the first small call until a quiet minute', async () => {
  let now = 0;
  const changes: number[] = [];
  const turns = new LargeCallTurns(policy, 1 << 20, (n) => changes.push(n), () => now);
  const started: string[] = [];
  const calls = Array.from({ length: 8 }, (_, i) => heldCall(started, `c${i}`));
  const running = calls.slice(0, 5).map((c) => turns.run(100, c.fn));
  await turnOver();
  assert.deepEqual(started, ['c0', 'c1', 'c2', 'c3'], 'no small call yet: 4 turns');

  now = 1_000;
  turns.smallCall();
  calls[0]!.release();
  calls[1]!.release();
  calls[2]!.release();
  await Promise.all(running.slice(0, 3));
  await turnOver();
  assert.deepEqual(started, ['c0', 'c1', 'c2', 'c3', 'c4'], 'after the small call: c4 got the second of 2 turns, not a fourth');
  assert.equal(turns.running, 2);

  running.push(turns.run(100, calls[5]!.fn));
  now = 1_000 + 59_999;
  running.push(turns.run(100, calls[6]!.fn));
  await turnOver();
  assert.equal(turns.running, 2, 'still within the quiet minute: 2 turns');

  now = 1_000 + 60_000;
  running.push(turns.run(100, calls[7]!.fn));
  await turnOver();
  assert.deepEqual(started, ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6'], 'a quiet minute: 4 turns, the waiting calls in arrival order first');
  assert.equal(turns.running, 4);
  assert.equal(turns.waiting, 100, 'c7 waits with its bytes');
  for (const c of calls) c.release();
  await Promise.all(running);
  assert.deepEqual(started, calls.map((_, i) => `c${i}`));
  assert.deepEqual(changes, [2, 4], 'told once when narrowed and once when widened');
  assert.equal(turns.running, 0);
});
