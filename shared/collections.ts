/** Append `value` to the list kept under `key` (grouping in one pass, no array copies). */
export function pushTo<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) {
    list.push(value);
  } else {
    map.set(key, [value]);
  }
}

/** Comparator for `Array.prototype.sort` of numbers, ascending (module-level: no arrow per call). */
export const ascending = (a: number, b: number): number => a - b;

/** Comparator for `Array.prototype.sort` of rows by their numeric `id`, ascending. */
export const byId = (a: { id: number }, b: { id: number }): number => a.id - b.id;

/** `map`'s value for `key`, made by `make` and kept the first time it is asked for. */
export function getOrMake<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}

/**
 * Ascending ids as runs of consecutive values: `lo[i]..hi[i]` holds exactly the ids of run i.
 * A lookup of many ids can then read each run as one index range (events written by one statement
 * take consecutive ids) instead of descending the index once per id. Duplicates fold into their run.
 */
export function consecutiveRuns(sortedIds: readonly number[]): { lo: number[]; hi: number[] } {
  const lo: number[] = [];
  const hi: number[] = [];
  for (const id of sortedIds) {
    const last = hi.length - 1;
    if (last >= 0 && (id === hi[last] || id === hi[last]! + 1)) {
      hi[last] = id;
    } else {
      lo.push(id);
      hi.push(id);
    }
  }
  return { lo, hi };
}
