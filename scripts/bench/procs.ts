/**
 * Child processes of the benchmark and what /proc says about them. Every process the harness
 * starts is registered here and stopped by `stopAll()` (also on Ctrl-C and on errors); nothing
 * else is ever signalled. Loopback only: children listen on 127.0.0.1.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, readdirSync, type WriteStream } from 'node:fs';
import { createInterface } from 'node:readline';

export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or signal name) once the process is gone. */
  exited: Promise<string>;
  alive(): boolean;
  /** Lines of output seen so far that parse as JSON with pino level >= 50 (error, fatal). */
  errorLines: string[];
  /** The last lines of output (stdout and stderr), for failure messages. */
  tail(): string;
}

const children = new Set<Child>();

export interface SpawnOptions {
  name: string;
  /** Executable; default this node binary. */
  command?: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  logFile: string;
  /** Called with every output line; return a value to resolve `ready`. */
  ready?: (line: string) => unknown;
  /** For a process that prints nothing when ready: asked every 200 ms; `true` resolves `ready` with true. */
  readyProbe?: () => Promise<boolean>;
  readyTimeoutMs?: number;
  /** Called with every output line and the stream it came from (the fault suite counts non-JSON lines per stream). */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Run as this user and group (root only: the fault suite's Postgres runs as `postgres`). */
  uid?: number;
  gid?: number;
}

/** Starts `node <args>` (or `command`) and waits until `ready` recognises a line (or the process dies / times out). */
export async function spawnChild<T = unknown>(opts: SpawnOptions): Promise<{ child: Child; ready: T }> {
  const log: WriteStream = createWriteStream(opts.logFile, { flags: 'a' });
  // Each child in a session of its own, as the Procfile's processes are separate services (systemd
  // units, containers) in production: with the kernel's autogroup scheduling (on here) children
  // that share the harness's session share one CPU share among them, while every Postgres backend
  // (postmaster children call setsid) has a share of its own, which starved the service processes
  // of the priority path (priority accept → submit_sm p50 1,087 → 442 ms on this change alone).
  // Marked with the harness's pid, so that a later run can find and stop children whose harness
  // died without stopping them (being detached, they outlive a killed process group).
  const env = { ...opts.env, [CHILD_MARK]: String(process.pid) };
  const proc = spawn(opts.command ?? process.execPath, opts.args, {
    cwd: opts.cwd, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true,
    ...(opts.uid !== undefined && { uid: opts.uid }), ...(opts.gid !== undefined && { gid: opts.gid }),
  });
  proc.on('error', (err) => !log.writableEnded && log.write(`spawn error: ${err.message}\n`));
  if (proc.pid === undefined) {
    throw new Error(`${opts.name}: could not start ${opts.command ?? 'node'} ${opts.args.join(' ')}`);
  }
  const lines: string[] = [];
  const errorLines: string[] = [];
  let resolveReady: ((value: T) => void) | null = null;
  const readyPromise = new Promise<T>((resolve) => {
    resolveReady = resolve;
  });
  const onLine = (line: string): void => {
    if (!log.writableEnded) log.write(`${line}\n`);
    lines.push(line);
    if (lines.length > 40) {
      lines.shift();
    }
    if (line.startsWith('{') && /"level":(5\d|60)/.test(line)) {
      if (errorLines.length < 200) {
        errorLines.push(line);
      }
    }
    if (resolveReady && opts.ready) {
      const value = opts.ready(line);
      if (value !== undefined && value !== null && value !== false) {
        const r = resolveReady;
        resolveReady = null;
        r(value as T);
      }
    }
  };
  const tap = opts.onLine;
  createInterface({ input: proc.stdout! }).on('line', tap ? (line) => { tap(line, 'stdout'); onLine(line); } : onLine);
  createInterface({ input: proc.stderr! }).on('line', tap ? (line) => { tap(line, 'stderr'); onLine(line); } : onLine);
  const exited = new Promise<string>((resolve) => {
    proc.once('exit', (code, signal) => {
      resolve(signal ?? String(code));
    });
  });
  let gone = false;
  // The log ends once the child's output is read to its end ('close', after 'exit': lines can
  // still arrive between the two), or a second after its exit when a grandchild keeps the pipes.
  let endTimer: NodeJS.Timeout | null = null;
  const endLog = (): void => {
    if (endTimer) clearTimeout(endTimer);
    if (!log.writableEnded) log.end();
  };
  proc.once('close', endLog);
  void exited.then(() => {
    gone = true;
    endTimer = setTimeout(endLog, 1000);
    endTimer.unref();
  });
  const child: Child = {
    name: opts.name,
    proc,
    pid: proc.pid,
    exited,
    alive: () => !gone,
    errorLines,
    tail: () => lines.slice(-15).join('\n'),
  };
  children.add(child);
  void exited.then(() => children.delete(child));
  const probe = opts.readyProbe;
  if (probe) {
    void (async () => {
      while (resolveReady && !gone) {
        if (await probe().catch(() => false)) {
          const r = resolveReady as ((value: T) => void) | null;
          resolveReady = null;
          r?.(true as T);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
  }
  const timeoutMs = opts.readyTimeoutMs ?? 30_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    const ready = await Promise.race([
      readyPromise,
      exited.then((how) => {
        throw new Error(`${opts.name} exited (${how}) before it was ready:\n${child.tail()}`);
      }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${opts.name} not ready within ${timeoutMs} ms:\n${child.tail()}`)), timeoutMs);
      }),
    ]);
    return { child, ready };
  } catch (err) {
    await stopChild(child);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

const CHILD_MARK = 'SWITCHBOARD_BENCH_HARNESS_PID';

/**
 * Children of earlier runs whose harness is gone (killed before it could stop them): SIGKILLed,
 * so that they hold no ports, Postgres connections or CPU during this run. Returns how many.
 */
export function killOrphans(): number {
  let killed = 0;
  for (const pid of processIds()) {
    if (pid === process.pid) {
      continue;
    }
    let environ: string;
    try {
      environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
    } catch {
      continue; // gone, or not ours to read
    }
    const mark = environ.split('\0').find((v) => v.startsWith(`${CHILD_MARK}=`));
    if (!mark) {
      continue;
    }
    const harness = Number(mark.slice(CHILD_MARK.length + 1));
    if (harness === process.pid || isAlive(harness)) {
      continue;
    }
    try {
      process.kill(pid, 'SIGKILL');
      killed++;
    } catch {
      // already gone
    }
  }
  return killed;
}

/** Every process id on the machine (empty when /proc cannot be read). */
function processIds(): number[] {
  try {
    return readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).map(Number);
  } catch {
    return [];
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves when the process is gone. */
export async function stopChild(child: Child, graceMs = 35_000): Promise<string> {
  if (!child.alive()) {
    return child.exited;
  }
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => {
    if (child.alive()) {
      child.proc.kill('SIGKILL');
    }
  }, graceMs);
  try {
    return await child.exited;
  } finally {
    clearTimeout(timer);
  }
}

export async function stopAll(graceMs = 35_000): Promise<void> {
  await Promise.all([...children].map((c) => stopChild(c, graceMs)));
}

export function liveChildren(): Child[] {
  return [...children];
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

let clockTicks: number | null = null;

/** USER_HZ (clock ticks per second of /proc/<pid>/stat). */
export function ticksPerSecond(): number {
  if (clockTicks === null) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of a process (all its threads) in seconds, or null when it is gone. */
export function processCpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces: fields after the last ')' are fixed.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    return (utime + stime) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** Resident set size in bytes, or null when the process is gone. */
export function processRssBytes(pid: number): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(status);
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Read and write system calls of a process so far (/proc/<pid>/io), or null. */
export function processSyscalls(pid: number): { r: number; w: number } | null {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const r = /syscr:\s+(\d+)/.exec(io);
    const w = /syscw:\s+(\d+)/.exec(io);
    return r && w ? { r: Number(r[1]), w: Number(w[1]) } : null;
  } catch {
    return null;
  }
}

/** Busy and total CPU seconds of the whole machine (all cores) from /proc/stat. */
export function machineCpuSeconds(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: (total - idle) / ticksPerSecond(), total: total / ticksPerSecond() };
}

export type PgKind = 'bench' | 'shared' | 'other';

/** Pids seen in the last sample that are not Postgres processes (see `postgresProcesses`). */
let notPostgres = new Set<number>();

/**
 * Every postgres process with its cumulative CPU, classified: `bench` = a backend (or autovacuum
 * worker) of one of `databases`; `shared` = the postmaster and the cluster's auxiliary processes
 * (checkpointer, WAL writer, background writer, launchers), which work for every database;
 * `other` = backends of other databases (other users of the machine: a noise indicator).
 */
export function postgresProcesses(databases: Set<string>): Array<{ pid: number; kind: PgKind; cpu: number; w: number }> {
  const found: Array<{ pid: number; cmdline: string; cpu: number }> = [];
  // Processes that are not Postgres are remembered as such: sampling every 250 ms read the name
  // of every process on the machine (most of the harness's reads of /proc). A pid is not reused
  // within one sample interval. A backend's command line is read every time: it names its
  // database only once the backend has started.
  const seen = new Set<number>();
  for (const pid of processIds()) {
    if (notPostgres.has(pid)) {
      seen.add(pid);
      continue;
    }
    let cmdline: string;
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      if (!comm.startsWith('postgres')) {
        seen.add(pid);
        continue;
      }
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    } catch {
      continue;
    }
    const cpu = processCpuSeconds(pid);
    if (cpu !== null) {
      found.push({ pid, cmdline, cpu });
    }
  }
  notPostgres = seen;
  const kindOf = new Map<number, PgKind>();
  const classify = (cmdline: string): PgKind => {
    if (cmdline.split(/\s+/).some((w) => databases.has(w))) {
      return 'bench';
    }
    if (!cmdline.startsWith('postgres:') || /: (checkpointer|background writer|walwriter|autovacuum launcher|logical replication launcher|stats collector|archiver|autovacuum worker|walsender|startup)\b/.test(cmdline)) {
      return 'shared';
    }
    return 'other';
  };
  for (const p of found) {
    if (!/parallel worker for PID/.test(p.cmdline)) {
      kindOf.set(p.pid, classify(p.cmdline));
    }
  }
  return found.map((p) => {
    // A parallel worker works for its leader's database.
    const leader = /parallel worker for PID (\d+)/.exec(p.cmdline);
    const kind = leader ? (kindOf.get(Number(leader[1])) ?? 'other') : kindOf.get(p.pid)!;
    return { pid: p.pid, kind, cpu: p.cpu, w: processSyscalls(p.pid)?.w ?? 0 };
  });
}
