import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunLease, VALID_SHARE } from '../../shared/engine/run-lease.js';

test('a run holds its job for three quarters of the lock after each renewal it sent, and never after a refused one', () => {
  const lock = 10_000;
  const lease = new RunLease(lock, 0);
  assert.equal(VALID_SHARE, 0.75);
  const steps: Array<[what: string, act: (l: RunLease) => void, at: number, held: boolean]> = [
    ['just started', () => undefined, 0, true],
    ['before the first renewal is due', () => undefined, 7_499, true],
    ['a pause past the hold, no renewal seen', () => undefined, 7_500, false],
    ['a renewal sent at 5 s, answered at 8 s (BullMQ renews every lock / 4 to lock / 2)', (l) => l.renewed(5_000), 8_000, true],
    ['3/4 lock after that renewal was sent', () => undefined, 12_499, true],
    ['paused from 9 s to 20 s: over when it runs again', () => undefined, 20_000, false],
    ['the answer of a renewal sent at 8.9 s, read after the pause: still over', (l) => l.renewed(8_900), 20_000, false],
    ['a renewal sent after the pause and granted brings it back', (l) => l.renewed(20_050), 20_100, true],
    ['an older renewal answered late never shortens it', (l) => l.renewed(10_000), 26_000, true],
    ['a renewal refused: gone at once', (l) => l.lost(), 26_100, false],
    ['and a renewal after that does not bring it back', (l) => l.renewed(26_200), 26_200, false],
  ];
  for (const [what, act, at, held] of steps) {
    act(lease);
    assert.equal(lease.held(at), held, what);
  }
});
