/**
 * The fault suite's own PostgreSQL cluster and Redis, on free loopback ports in the run's temporary
 * directory, so they can be stopped in immediate mode / killed -9 and started again without
 * touching the shared instances (5432, 6379). Both run as child processes registered in
 * scripts/bench/procs.ts; `remove()` of the run directory is the caller's.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, statSync, truncateSync } from 'node:fs';
import path from 'node:path';
import { spawnChild, stopChild, type Child } from '../bench/procs.js';
import { freePort } from '../bench/stack.js';

const PG_BIN = process.env.FAULTS_PG_BIN ?? '/usr/lib/postgresql/15/bin';

function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) {
    return null; // not root: initdb and postgres run as ourselves
  }
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/** A PostgreSQL 15 cluster made with initdb in `<runDir>/pg` (trust auth for 127.0.0.1, superuser `root`). */
export class OwnPostgres {
  private child: Child | null = null;
  private starts = 0;

  private constructor(
    readonly port: number,
    private readonly dataDir: string,
    private readonly runDir: string,
    private readonly user: { uid: number; gid: number } | null,
  ) {}

  static async create(runDir: string): Promise<OwnPostgres> {
    const user = postgresUser();
    const parent = path.join(runDir, 'pg');
    mkdirSync(parent, { recursive: true });
    if (user) {
      chownSync(parent, user.uid, user.gid);
    }
    const dataDir = path.join(parent, 'data');
    execFileSync(path.join(PG_BIN, 'initdb'), ['-D', dataDir, '-A', 'trust', '-U', 'root', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'], {
      stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, ...(user && { uid: user.uid, gid: user.gid }),
    });
    return new OwnPostgres(await freePort(), dataDir, runDir, user);
  }

  url(database: string): string {
    return `postgres://root@127.0.0.1:${this.port}/${database}`;
  }

  get pid(): number | null {
    return this.child?.alive() ? this.child.pid : null;
  }

  /** Starts the postmaster and waits until it accepts connections (after crash recovery, when one is due). */
  async start(): Promise<void> {
    this.starts++;
    const { child } = await spawnChild({
      name: 'postgres',
      command: path.join(PG_BIN, 'postgres'),
      args: ['-D', this.dataDir, '-p', String(this.port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=',
        '-c', 'max_connections=200', '-c', 'shared_buffers=128MB', '-c', 'log_line_prefix=%m [%p] '],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C.UTF-8' },
      cwd: this.runDir,
      logFile: path.join(this.runDir, 'postgres.log'),
      ready: (line) => /database system is ready to accept connections/.test(line),
      readyTimeoutMs: 120_000,
      ...(this.user && { uid: this.user.uid, gid: this.user.gid }),
    });
    this.child = child;
  }

  /** `pg_ctl stop -m immediate`: SIGQUIT to the postmaster, no checkpoint; the next start recovers from the WAL. */
  async stopImmediate(): Promise<void> {
    const c = this.child;
    if (!c?.alive()) {
      return;
    }
    c.proc.kill('SIGQUIT');
    const timer = setTimeout(() => c.alive() && c.proc.kill('SIGKILL'), 10_000);
    await c.exited;
    clearTimeout(timer);
  }

  /** Fast shutdown (SIGINT: disconnects clients, checkpoints). */
  async stop(): Promise<void> {
    const c = this.child;
    if (!c?.alive()) {
      return;
    }
    c.proc.kill('SIGINT');
    const timer = setTimeout(() => c.alive() && c.proc.kill('SIGQUIT'), 20_000);
    await c.exited;
    clearTimeout(timer);
  }

  exists(): boolean {
    return existsSync(this.dataDir);
  }
}

/**
 * redis-server with AOF (everysec) and noeviction in `<runDir>/redis`, as the README asks of
 * production. While it runs, the size of its current AOF file is noted every 100 ms, so that a
 * crash can be made to lose the writes of its last second: what `appendfsync everysec` allows
 * when the host fails (a kill -9 of the process alone loses nothing that was written to the file).
 */
export class OwnRedis {
  private child: Child | null = null;
  private sizes: Array<{ t: number; file: string; size: number }> = [];
  private sizeTimer: NodeJS.Timeout | null = null;

  private constructor(readonly port: number, private readonly dir: string, private readonly runDir: string) {}

  static async create(runDir: string): Promise<OwnRedis> {
    const dir = path.join(runDir, 'redis');
    mkdirSync(dir, { recursive: true });
    return new OwnRedis(await freePort(), dir, runDir);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | null {
    return this.child?.alive() ? this.child.pid : null;
  }

  async start(): Promise<void> {
    const { child } = await spawnChild({
      name: 'redis-server',
      command: 'redis-server',
      args: ['--port', String(this.port), '--bind', '127.0.0.1', '--protected-mode', 'yes', '--dir', this.dir,
        '--appendonly', 'yes', '--appendfsync', 'everysec', '--aof-load-truncated', 'yes', '--save', '', '--maxmemory-policy', 'noeviction'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      cwd: this.dir,
      logFile: path.join(this.runDir, 'redis.log'),
      ready: (line) => /Ready to accept connections/.test(line),
      readyTimeoutMs: 60_000,
    });
    this.child = child;
    this.sizes = [];
    this.sizeTimer ??= setInterval(() => this.noteSize(), 100);
    this.sizeTimer.unref();
  }

  /** The AOF file Redis appends to now (the manifest's `type i` entry). */
  private currentAof(): string | null {
    try {
      const manifest = readFileSync(path.join(this.dir, 'appendonlydir', 'appendonly.aof.manifest'), 'utf8');
      const incr = manifest.split('\n').filter((l) => / type i\b/.test(l)).pop();
      const file = incr ? /^file (\S+)/.exec(incr)?.[1] : undefined;
      return file ? path.join(this.dir, 'appendonlydir', file) : null;
    } catch {
      return null;
    }
  }

  private noteSize(): void {
    if (!this.child?.alive()) {
      return;
    }
    const file = this.currentAof();
    if (!file) {
      return;
    }
    try {
      this.sizes.push({ t: Date.now(), file, size: statSync(file).size });
    } catch {
      return;
    }
    if (this.sizes.length > 200) {
      this.sizes.shift();
    }
  }

  /**
   * kill -9; with `loseMs` > 0 the AOF is then cut back to its length `loseMs` before the kill (a
   * cut inside a command or a MULTI is dropped by aof-load-truncated when Redis loads it). Returns
   * the bytes cut (0 when nothing was, or the file changed within that time, e.g. by a rewrite).
   */
  async kill9(loseMs = 0): Promise<number> {
    const c = this.child;
    if (!c?.alive()) {
      return 0;
    }
    c.proc.kill('SIGKILL');
    await c.exited;
    if (this.sizeTimer) {
      clearInterval(this.sizeTimer);
      this.sizeTimer = null;
    }
    const killedAt = Date.now();
    const file = this.currentAof();
    const before = [...this.sizes].reverse().find((s) => s.t <= killedAt - loseMs);
    if (loseMs <= 0 || !file || !before || before.file !== file) {
      return 0;
    }
    const now = statSync(file).size;
    if (now <= before.size) {
      return 0;
    }
    truncateSync(file, before.size);
    return now - before.size;
  }

  async stop(): Promise<void> {
    if (this.sizeTimer) {
      clearInterval(this.sizeTimer);
      this.sizeTimer = null;
    }
    if (this.child) {
      await stopChild(this.child, 10_000);
    }
  }
}
