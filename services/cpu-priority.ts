/**
 * A worker that dispatches bulk lanes only (worker_sms, worker_channels) gives up CPU to the
 * processes on an OTP's path (web, worker_priority, Postgres) when the machine is full.
 *
 * Linux shares the CPU between sessions first (autogroup scheduling), then between the processes
 * of a session by their nice values. Every role runs in a session of its own, as separate services
 * do (`switchboard start` spawns its children detached; systemd starts each service so), so a nice
 * value alone would rank the process only against itself: the worker also lowers its session's
 * autogroup nice (`/proc/self/autogroup`) when it leads that session. Measured in
 * docs/benchmarks.md ("A CPU share for the bulk workers", thirteenth session): priority accept →
 * submit_sm p99 under a bulk backlog about halved (114–164 → 45–81 ms in six alternating pairs),
 * end-to-end throughput unchanged.
 * Where the CPU controller of cgroups is on (Docker, systemd units with CPUWeight=), autogroups
 * are not used and the operator's group weights decide instead (README, "CPU priority").
 */
import { getPriority, setPriority } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import type { Lane } from '../shared/queues.js';
import type { Logger } from '../shared/logger.js';

/** The nice value a process should take, or null to keep its own (pure). */
export function bulkWorkerNice(p: { role: 'all' | 'web' | 'worker'; dispatching: boolean; lanes: readonly Lane[]; nice: number }): number | null {
  if (p.nice <= 0 || p.role !== 'worker' || !p.dispatching || p.lanes.includes('priority')) return null;
  return p.nice;
}

export interface CpuPriorityResult {
  /** The process's nice value afterwards. */
  nice: number;
  /** The session's autogroup nice afterwards, or null when this process does not lead an autogroup of its own. */
  autogroupNice: number | null;
}

/**
 * Raises this process's nice value, and its autogroup's when it leads its own session, to `nice`
 * (never lowers either: that would need privileges, and an operator who set more meant it).
 */
export function lowerCpuPriority(nice: number): CpuPriorityResult {
  if (getPriority() < nice) setPriority(nice);
  let autogroupNice: number | null = null;
  const group = readAutogroup();
  if (group !== null && leadsSession()) {
    if (group < nice) writeFileSync('/proc/self/autogroup', String(nice));
    autogroupNice = readAutogroup();
  }
  return { nice: getPriority(), autogroupNice };
}

/** `lowerCpuPriority` for a process that starts, with a log line of what it did or why it could not. */
export function applyBulkWorkerNice(nice: number | null, logger: Logger): void {
  if (nice === null) return;
  try {
    logger.info({ ...lowerCpuPriority(nice) }, 'bulk-only worker: lower CPU priority than the API and the priority lane (BULK_WORKER_NICE)');
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'could not lower this worker\'s CPU priority (BULK_WORKER_NICE); it runs at its own');
  }
}

/** The autogroup's nice value (`/autogroup-N nice K`), or null without autogroup scheduling. */
function readAutogroup(): number | null {
  try {
    const m = /nice (-?\d+)/.exec(readFileSync('/proc/self/autogroup', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Whether the process leads its session (`/proc/self/stat`: field 6, the session id, is its pid). */
function leadsSession(): boolean {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[3]) === process.pid;
}
