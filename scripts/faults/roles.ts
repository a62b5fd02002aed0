/**
 * The service's processes as a supervisor runs them: one per Procfile role, or more of some roles
 * (scripts/bench/copies.ts); a process that exits without being told to is started again after a pause (and
 * counted). Every output line is classified per process and stream: a JSON line, or a raw line
 * (a stack trace or a library's console message outside the structured log).
 */
import path from 'node:path';
import { spawnChild, stopChild, type Child } from '../bench/procs.js';
import { expandCopies, type CopiesSpec } from '../bench/copies.js';
import type { RoleCommand } from './plan.js';

export interface LineCounts {
  json: number;
  rawStdout: number;
  rawStderr: number;
  /** First raw lines (for the report). */
  examples: string[];
  /** JSON lines with pino level >= 50. */
  errors: number;
  errorExamples: string[];
  /** "recovery sweep re-enqueued work" lines: how many, the dispatch jobs they re-added, the last one's time. */
  sweeps: { lines: number; dispatch: number; lastAt: number };
}

export interface RoleProcess {
  /** `worker_sms` or `worker_sms#2`. */
  id: string;
  role: string;
  command: RoleCommand;
  child: Child | null;
  starts: number;
  /** Exits we did not cause (the supervisor restarted the process). */
  unexpectedExits: Array<{ atMs: number; how: string }>;
  lines: LineCounts;
  /** Set while we stop or kill it on purpose. */
  expectingExit: boolean;
}

const RESTART_PAUSE_MS = 2000;

export class Supervisor {
  readonly processes: RoleProcess[] = [];
  private stopping = false;
  private readonly t0 = Date.now();

  constructor(
    commands: RoleCommand[],
    copies: CopiesSpec,
    private readonly env: Record<string, string>,
    private readonly root: string,
    private readonly runDir: string,
    private readonly log: (message: string) => void,
  ) {
    for (const command of commands) {
      for (const { id } of expandCopies([command.role], copies)) {
        this.processes.push({
          id, role: command.role, command, child: null, starts: 0,
          unexpectedExits: [], expectingExit: false,
          lines: { json: 0, rawStdout: 0, rawStderr: 0, examples: [], errors: 0, errorExamples: [], sweeps: { lines: 0, dispatch: 0, lastAt: 0 } },
        });
      }
    }
  }

  byId(id: string): RoleProcess {
    const p = this.processes.find((x) => x.id === id);
    if (!p) {
      throw new Error(`no process ${id}`);
    }
    return p;
  }

  /** The copies of a role, first copy first. */
  copiesOf(role: string): RoleProcess[] {
    return this.processes.filter((p) => p.role === role);
  }

  /** `web` first (it migrates the database), then every other process at once. */
  async startAll(): Promise<void> {
    const [first, ...rest] = [...this.processes].sort((a, b) => Number(b.role === 'web') - Number(a.role === 'web'));
    if (first) {
      await this.start(first);
    }
    await Promise.all(rest.map((p) => this.start(p)));
  }

  async start(p: RoleProcess): Promise<void> {
    p.expectingExit = false;
    p.starts++;
    const { command } = p;
    const spawnArgs = command.kind === 'node'
      ? { args: command.args }
      : { command: 'sh', args: ['-c', `exec ${command.line}`] };
    const { child } = await spawnChild({
      name: p.id,
      ...spawnArgs,
      env: this.env,
      cwd: this.root,
      logFile: path.join(this.runDir, `${p.id.replace('#', '-')}.log`),
      ready: (line) => line.includes('switchboard started'),
      readyTimeoutMs: 60_000,
      onLine: (line, stream) => this.count(p, line, stream),
    });
    p.child = child;
    void child.exited.then((how) => this.onExit(p, child, how));
  }

  private count(p: RoleProcess, line: string, stream: 'stdout' | 'stderr'): void {
    const c = p.lines;
    let parsed: unknown = null;
    if (line.startsWith('{')) {
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = null;
      }
    }
    if (parsed !== null && typeof parsed === 'object') {
      c.json++;
      const { level, msg, dispatch } = parsed as { level?: unknown; msg?: unknown; dispatch?: unknown };
      if (msg === 'recovery sweep re-enqueued work' && typeof dispatch === 'number' && dispatch > 0) {
        c.sweeps.lines++;
        c.sweeps.dispatch += dispatch;
        c.sweeps.lastAt = Date.now();
      }
      if (typeof level === 'number' && level >= 50) {
        c.errors++;
        if (c.errorExamples.length < 5) {
          c.errorExamples.push(line.slice(0, 400));
        }
      }
      return;
    }
    if (stream === 'stdout') {
      c.rawStdout++;
    } else {
      c.rawStderr++;
    }
    if (c.examples.length < 8 && line.trim() !== '') {
      c.examples.push(`${stream}: ${line.slice(0, 300)}`);
    }
  }

  private onExit(p: RoleProcess, child: Child, how: string): void {
    if (p.child !== child || p.expectingExit || this.stopping) {
      return;
    }
    p.unexpectedExits.push({ atMs: Date.now() - this.t0, how });
    this.log(`${p.id} exited on its own (${how}); restarting it in ${RESTART_PAUSE_MS / 1000} s`);
    setTimeout(() => void this.restartUntilUp(p), RESTART_PAUSE_MS);
  }

  /** Starts a process again, retrying (as a supervisor does) while it fails to come up. */
  async restartUntilUp(p: RoleProcess, until = Date.now() + 300_000): Promise<boolean> {
    while (!this.stopping && Date.now() < until) {
      if (p.child?.alive()) {
        return true;
      }
      try {
        await this.start(p);
        return true;
      } catch (err) {
        this.log(`${p.id} did not start: ${(err as Error).message.split('\n')[0]}; trying again in ${RESTART_PAUSE_MS / 1000} s`);
        await new Promise((r) => setTimeout(r, RESTART_PAUSE_MS));
      }
    }
    return false;
  }

  /** kill -9 (no shutdown handlers run). */
  async kill9(p: RoleProcess): Promise<void> {
    const c = p.child;
    if (!c?.alive()) {
      return;
    }
    p.expectingExit = true;
    c.proc.kill('SIGKILL');
    await c.exited;
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.processes.map(async (p) => {
      p.expectingExit = true;
      if (p.child) {
        await stopChild(p.child, 20_000);
      }
    }));
  }
}
