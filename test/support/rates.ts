/** Rate checks shared by the throughput-cap tests. */

/** The most of `sorted` (ascending times in ms) inside any sliding window [t, t + windowMs). */
export function worstWindow(sorted: readonly number[], windowMs = 1000): number {
  let worst = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && sorted[j]! < sorted[i]! + windowMs) j++;
    worst = Math.max(worst, j - i);
  }
  return worst;
}
