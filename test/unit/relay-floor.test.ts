import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayFloor } from '../../shared/webhooks/relay.js';

test('the relay floor follows pass marks only once they are lagMs old, and rescans from 0 every fullPassMs', () => {
  const floor = new RelayFloor(2_000, 15_000, 0);
  const steps: Array<[string, () => unknown, unknown]> = [
    ['nothing recorded yet', () => floor.next(100), 0],
    ['a pass that read nothing moves nothing', () => (floor.record(100, null), floor.next(2_500)), 0],
    ['a fresh mark is not used yet', () => (floor.record(1_000, 40), floor.next(2_000)), 0],
    ['a mark lagMs old is used', () => floor.next(3_000), 40],
    ['marks are used in order, never backwards', () => (floor.record(3_000, 90), floor.record(3_500, 70), floor.next(5_600)), 90],
    ['every fullPassMs one pass starts from the beginning', () => floor.next(15_000), 0],
    ['and the next one from the floor again', () => floor.next(15_001), 90],
  ];
  for (const [what, run, expected] of steps) {
    assert.equal(run(), expected, what);
  }
});
