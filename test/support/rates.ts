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

/**
 * Events per second over `sorted` (ascending times in ms): the slope of a least-squares line
 * through (time, count so far), so that one late first or last event does not bend it as it bends
 * (n - 1) / span. A process that runs late sends or stamps a few events together; the line
 * through all of them is what the cap holds over time.
 */
export function fittedRate(sorted: readonly number[]): number {
  const n = sorted.length;
  const meanT = sorted.reduce((a, t) => a + t, 0) / n;
  const meanI = (n - 1) / 2;
  let num = 0;
  let den = 0;
  sorted.forEach((t, i) => {
    num += (t - meanT) * (i - meanI);
    den += (t - meanT) ** 2;
  });
  return (num / den) * 1000;
}
