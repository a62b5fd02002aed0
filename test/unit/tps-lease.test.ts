import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LEASE_HORIZON_MS, capShape, nextLeaseSize, shouldRenewEarly } from '../../shared/carriers/smpp/tps-lease.js';

describe('capShape', () => {
  const cases: Array<[tps: number, guardMs: number, expected: ReturnType<typeof capShape>]> = [
    [200, 20, { budget: 200, windowMs: 1020, intervalUs: 5000, maxLease: 20, burst: 40 }],
    [100_000, 20, { budget: 100_000, windowMs: 1020, intervalUs: 10, maxLease: 10_000, burst: 20_000 }],
    [20, 0, { budget: 20, windowMs: 1000, intervalUs: 50_000, maxLease: 2, burst: 4 }],
    [5, 20, { budget: 5, windowMs: 1020, intervalUs: 200_000, maxLease: 1, burst: 2 }], // a lease is never empty
    [1, 20, { budget: 1, windowMs: 1020, intervalUs: 1e6, maxLease: 1, burst: 1 }], // burst never above the budget
    [2.5, 20, { budget: 2, windowMs: 1020, intervalUs: 400_000, maxLease: 1, burst: 2 }], // fractions above one round down
    [0.5, 20, { budget: 1, windowMs: 2020, intervalUs: 2e6, maxLease: 1, burst: 1 }], // one token per 2 s
  ];
  for (const [tps, guard, expected] of cases) {
    it(`tps ${tps}, guard ${guard} ms`, () => assert.deepEqual(capShape(tps, guard), expected));
  }
  it('refuses a cap that is not positive', () => {
    assert.throws(() => capShape(0, 20), RangeError);
    assert.throws(() => capShape(Number.NaN, 20), RangeError);
  });
});

describe('nextLeaseSize', () => {
  const cases: Array<[what: string, prev: Parameters<typeof nextLeaseSize>[0], maxLease: number, expected: number]> = [
    ['no history: a quarter of the largest lease', null, 20, 5],
    ['no history, tiny cap', null, 1, 1],
    ['steady demand of 4 tokens/ms lasts the horizon', { granted: 1000, spent: 800, heldMs: 200 }, 10_000, 4 * LEASE_HORIZON_MS],
    ['capped at maxLease', { granted: 1000, spent: 800, heldMs: 200 }, 100, 100],
    ['ran out fast: at least twice the last one', { granted: 5, spent: 5, heldMs: 1000 }, 20, 10],
    ['ran out within no time (binding): the largest lease', { granted: 20, spent: 20, heldMs: 0 }, 20, 20],
    ['expired nearly unspent: shrinks to what the demand needs', { granted: 2500, spent: 10, heldMs: 500 }, 10_000, 5],
    ['expired unspent: one token', { granted: 50, spent: 0, heldMs: 500 }, 10_000, 1],
  ];
  for (const [what, prev, maxLease, expected] of cases) {
    it(what, () => assert.equal(nextLeaseSize(prev, maxLease), expected));
  }
});

describe('shouldRenewEarly', () => {
  const cases: Array<[what: string, args: Parameters<typeof shouldRenewEarly>, expected: boolean]> = [
    ['plenty left', [100, 50, 10, 500], false],
    ['a quarter left, going fast', [100, 75, 100, 500], true],
    ['a quarter left, too slow to run out before expiry', [100, 75, 400, 500], false],
    ['exactly runs out at expiry: not ahead', [100, 80, 400, 500], false],
    ['exhausted: the next take asks anyway', [100, 100, 10, 500], false],
    ['one-token lease, unspent', [1, 0, 0, 500], false],
    ['four tokens, three spent at once', [4, 3, 0, 500], true],
  ];
  for (const [what, args, expected] of cases) {
    it(what, () => assert.equal(shouldRenewEarly(...args), expected));
  }
});
