import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunLease, VALID_SHARE } from '../../shared/engine/run-lease.js';

test('a run holds its job for three quarters of the lock after each renewal it saw, and never after a refused one', () => {
  const lock = 10_000;
  const lease = new RunLease(lock, 0);
  assert.equal(VALID_SHARE, 0.75);
  const steps: Array<[what: string, act: (l: RunLease) => void, at: number, held: boolean]> = [
    ['just started', () => undefined, 0, true],
    ['before the first renewal is due', () => undefined, 7_499, true],
    ['a pause past the hold, no renewal seen', () => undefined, 7_500, false],
    ['renewed at 8 s (BullMQ renews about every lock / 2)', (l) => l.renewed(8_000), 8_000, true],
    ['3/4 lock after that renewal', () => undefined, 15_499, true],
    ['paused from 9 s to 16 s: over when it runs again', () => undefined, 16_000, false],
    ['a late renewal answer brings it back (the lock was still its own)', (l) => l.renewed(16_100), 16_100, true],
    ['a renewal refused: gone at once', (l) => l.lost(), 16_200, false],
    ['and a renewal after that does not bring it back', (l) => l.renewed(16_300), 16_300, false],
  ];
  for (const [what, act, at, held] of steps) {
    act(lease);
    assert.equal(lease.held(at), held, what);
  }
});
