/** `consecutiveRuns`: ascending ids as ranges that hold exactly those ids. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { consecutiveRuns } from '../../shared/collections.js';

test('ascending ids become runs of consecutive values, each range holding exactly its ids', () => {
  const cases: Array<{ name: string; ids: number[]; lo: number[]; hi: number[] }> = [
    { name: 'none', ids: [], lo: [], hi: [] },
    { name: 'one id', ids: [7], lo: [7], hi: [7] },
    { name: 'one run', ids: [3, 4, 5, 6], lo: [3], hi: [6] },
    { name: 'gaps of one and more', ids: [1, 2, 4, 5, 9], lo: [1, 4, 9], hi: [2, 5, 9] },
    { name: 'no two consecutive', ids: [10, 12, 14], lo: [10, 12, 14], hi: [10, 12, 14] },
    { name: 'duplicates fold into their run', ids: [5, 5, 6, 6, 8, 8], lo: [5, 8], hi: [6, 8] },
    { name: 'large ids', ids: [2 ** 40, 2 ** 40 + 1, 2 ** 41], lo: [2 ** 40, 2 ** 41], hi: [2 ** 40 + 1, 2 ** 41] },
  ];
  for (const c of cases) {
    const runs = consecutiveRuns(c.ids);
    assert.deepEqual(runs, { lo: c.lo, hi: c.hi }, c.name);
    const covered: number[] = [];
    runs.lo.forEach((lo, i) => {
      for (let id = lo; id <= runs.hi[i]!; id++) covered.push(id);
    });
    assert.deepEqual(covered, [...new Set(c.ids)], `${c.name}: the ranges cover exactly the ids`);
  }
});
