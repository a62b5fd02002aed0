/**
 * The `start` role (`npm start`): a small supervisor that runs the Procfile's roles as the Procfile
 * runs them, each in a child process of its own, so that one command uses every core of the
 * machine. It runs the release step (migrations) once, starts every role with the node flags it
 * was itself started with (scripts/node-flags, through npm start), restarts a role that dies with
 * a growing pause, gives up (stops every role, exits 1 naming the role and the reason) when a role
 * dies at start again and again, and on SIGTERM or SIGINT drains every role and exits.
 *
 * Output: a child's stdout (its JSON log lines, each carrying `"process":"<role>"`) goes straight to
 * ours; its stderr (what a failed start says, a stack) is copied to ours line by line with the role
 * in front, and its last lines are the reason logged when the child exits. The supervisor's own
 * lines carry `"process":"supervisor"`, and those about one child `"child":"<role>"`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { ConfigError, loadConfig, metricsPortCollision, type Config } from '../shared/config.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { createPool, migrate } from '../shared/db/pool.js';
import { SecretBox } from '../shared/secrets/sealed.js';
import { checkCredentialsKey } from '../shared/secrets/key-check.js';
import { StartupError, checkEnvConnections, connectRedis, reachPostgres } from './core.js';
import { listen } from './listen.js';

// ---------------------------------------------------------------------------------------------
// What runs: the Procfile's lines (test/unit/start.test.ts holds the Procfile to this table)
// ---------------------------------------------------------------------------------------------

export interface ProcessSpec {
  /** The Procfile's name of the role (`worker_sms`). */
  name: string;
  /** Arguments after `dist/bin/switchboard.js`. */
  args: readonly string[];
}

/** The Procfile's `release:` line (the supervisor runs its work in-process, once, before the roles). */
export const RELEASE_ARGS: readonly string[] = ['migrate'];

/** The Procfile's roles, in its order. */
export const PROCFILE_PROCESSES: readonly ProcessSpec[] = [
  { name: 'web', args: ['web'] },
  { name: 'worker_sms', args: ['worker', '--pools=sms', '--lanes=transactional,promotional'] },
  { name: 'worker_channels', args: ['worker', '--pools=viber,whatsapp', '--lanes=transactional,promotional'] },
  { name: 'worker_priority', args: ['worker', '--pools=sms,viber,whatsapp', '--lanes=priority'] },
  { name: 'worker_status', args: ['worker', '--pools=status,sweep'] },
  { name: 'worker_webhooks', args: ['worker', '--pools=webhooks,relay'] },
];

/**
 * Set in a child's environment to its role's name: the child names itself in its log lines, tells
 * the supervisor over the IPC channel once it started, and drains when that channel closes (the
 * supervisor is gone, even killed).
 */
export const SUPERVISED_ENV = 'SWITCHBOARD_SUPERVISED';

/** The message a supervised child sends once it started. */
export const STARTED_MESSAGE = { switchboard: 'started' } as const;

// ---------------------------------------------------------------------------------------------
// Restart or give up (pure; table-tested in test/unit/start.test.ts)
// ---------------------------------------------------------------------------------------------

export interface RestartPolicy {
  /** Exits in a row before the child said it started, after which the supervisor gives up. */
  maxStartFailures: number;
  /** Pause before the first restart; it doubles with each exit in a row, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** A child that ran this long before it exited starts the count of exits in a row again. */
  stableMs: number;
}

export const RESTART_POLICY: RestartPolicy = { maxStartFailures: 3, baseDelayMs: 500, maxDelayMs: 30_000, stableMs: 60_000 };

/** What the supervisor remembers of one role between its exits. */
export interface ExitHistory {
  /** Exits in a row, each after less than `stableMs` (the pause grows with them). */
  failures: number;
  /** Of those, exits in a row before the child said it started. */
  startFailures: number;
}

export const NO_EXITS: ExitHistory = { failures: 0, startFailures: 0 };

export type RestartDecision =
  | { action: 'restart'; delayMs: number; history: ExitHistory }
  | { action: 'give-up'; history: ExitHistory };

/** What to do when a child exits unasked: `started` whether it said it started, `ranMs` how long it ran. */
export function decideRestart(history: ExitHistory, exit: { started: boolean; ranMs: number }, policy: RestartPolicy = RESTART_POLICY): RestartDecision {
  const failures = exit.ranMs >= policy.stableMs ? 1 : history.failures + 1;
  const startFailures = exit.started ? 0 : history.startFailures + 1;
  const next = { failures, startFailures };
  if (startFailures >= policy.maxStartFailures) return { action: 'give-up', history: next };
  return { action: 'restart', delayMs: Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (failures - 1)), history: next };
}

// ---------------------------------------------------------------------------------------------
// The release step
// ---------------------------------------------------------------------------------------------

/**
 * What would stop every role at start is found once, here, with the words of a one-process start:
 * a bad SMPP_URL, a PORT another program holds (the web role's, opened and closed again: one taken
 * later makes the web role fail its starts), unreachable Postgres or Redis, another
 * CREDENTIALS_KEY. Migrations are applied unless MIGRATE_ON_START=false (then the roles wait for
 * the schema, SCHEMA_WAIT_SECONDS).
 */
async function releaseStep(config: Config, logger: Logger): Promise<void> {
  checkEnvConnections(config);
  if (config.port !== 0) {
    const probe = createServer();
    await listen(probe, config.port, '0.0.0.0', 'PORT');
    await new Promise((resolve) => probe.close(resolve));
  }
  await reachPostgres(config);
  const db = createPool(config.databaseUrl, 1);
  try {
    if (config.migrateOnStart !== false) {
      const applied = await migrate(db);
      if (applied.length) logger.info({ applied }, 'migrations applied');
      const keyProblem = await checkCredentialsKey(db, new SecretBox(config.credentialsKey));
      if (keyProblem) throw new StartupError(keyProblem);
    }
  } finally {
    await db.end();
  }
  (await connectRedis(config)).disconnect();
}

// ---------------------------------------------------------------------------------------------
// The supervisor
// ---------------------------------------------------------------------------------------------

interface Supervised {
  spec: ProcessSpec;
  /** Position in the table: the offset of its METRICS_PORT. */
  index: number;
  child: ChildProcess | null;
  spawnedAt: number;
  started: boolean;
  history: ExitHistory;
  /** The last stderr lines of the current run. */
  stderr: string[];
  restart: NodeJS.Timeout | null;
}

export interface SupervisorOptions {
  config?: Config;
  logger?: Logger;
  processes?: readonly ProcessSpec[];
  policy?: RestartPolicy;
  /** How long the roles may drain after SIGTERM before they are killed (each gives up itself after 30 s). */
  drainMs?: number;
}

const STDERR_LINES = 12;

/** Runs the roles until SIGTERM/SIGINT or until one cannot start; resolves with the exit status. */
export async function runSupervisor(opts: SupervisorOptions = {}): Promise<number> {
  const config = opts.config ?? loadConfig();
  const logger = (opts.logger ?? createLogger(config.logLevel)).child({ process: 'supervisor' });
  const processes = opts.processes ?? PROCFILE_PROCESSES;
  // Each role gets METRICS_PORT + its index (Supervisor.env): one of them must not be PORT.
  const collision = metricsPortCollision(config, processes.map((p) => p.name));
  if (collision) throw new ConfigError([collision]);
  await releaseStep(config, logger);
  const supervisor = new Supervisor(config, logger, processes, opts.policy ?? RESTART_POLICY, opts.drainMs ?? 35_000);
  const onSignal = (signal: NodeJS.Signals) => supervisor.stop(signal);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    supervisor.startAll();
    const status = await supervisor.done;
    if (supervisor.failure) throw new StartupError(supervisor.failure);
    return status;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

class Supervisor {
  readonly done: Promise<number>;
  /** Why the supervisor gave up, for the exit message. */
  failure: string | null = null;
  private finish!: (status: number) => void;
  private readonly roles: Supervised[];
  private stopping = false;
  private unclean = false;
  private announced = false;
  private force: NodeJS.Timeout | null = null;
  /** The flags the children run with: ours (scripts/node-flags under npm start; tsx's loader in tests), without a debugger's port. */
  private readonly execArgv = process.execArgv.filter((a) => !a.startsWith('--inspect'));
  private readonly entry = process.argv[1]!;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    processes: readonly ProcessSpec[],
    private readonly policy: RestartPolicy,
    private readonly drainMs: number,
  ) {
    this.roles = processes.map((spec, index) => ({ spec, index, child: null, spawnedAt: 0, started: false, history: NO_EXITS, stderr: [], restart: null }));
    this.done = new Promise((resolve) => {
      this.finish = resolve;
    });
  }

  startAll(): void {
    for (const role of this.roles) this.spawn(role);
  }

  /** The child's environment: its name, no migrating (done), and a METRICS_PORT of its own when one is set. */
  private env(role: Supervised): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env, [SUPERVISED_ENV]: role.spec.name, MIGRATE_ON_START: 'false' };
    const metricsPort = this.config.metricsPort;
    if (metricsPort !== null) env.METRICS_PORT = String(metricsPort === 0 ? 0 : metricsPort + role.index);
    return env;
  }

  private spawn(role: Supervised): void {
    role.restart = null;
    if (this.stopping) return;
    // Each child in a session of its own, as separate services are: with the kernel's autogroup
    // scheduling, processes of one session share one CPU share (every Postgres backend has one of
    // its own). Ctrl-C reaches the supervisor alone, which passes SIGTERM on.
    const child = spawn(process.execPath, [...this.execArgv, this.entry, ...role.spec.args], {
      env: this.env(role), stdio: ['ignore', 'inherit', 'pipe', 'ipc'], detached: true,
    });
    role.child = child;
    role.spawnedAt = Date.now();
    role.started = false;
    role.stderr = [];
    let exited = false;
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      if (exited) return;
      exited = true;
      this.exited(role, child, code, signal);
    };
    child.on('error', (err) => {
      role.stderr.push(err.message);
      if (child.pid === undefined) onExit(null, null);
    });
    // 'close': after its stderr ended, so the reason is complete.
    child.on('close', onExit);
    child.on('message', (message: unknown) => {
      if ((message as { switchboard?: unknown } | null)?.switchboard !== STARTED_MESSAGE.switchboard) return;
      role.started = true;
      if (!this.announced && this.roles.every((r) => r.started)) {
        this.announced = true;
        this.logger.info({ processes: Object.fromEntries(this.roles.map((r) => [r.spec.name, r.child?.pid ?? null])) }, 'every process started');
      }
    });
    createInterface({ input: child.stderr! }).on('line', (line) => {
      process.stderr.write(`${role.spec.name}: ${line}\n`);
      role.stderr.push(line);
      if (role.stderr.length > STDERR_LINES) role.stderr.shift();
    });
  }

  private exited(role: Supervised, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (role.child !== child) return;
    role.child = null;
    const how = signal ? `killed by ${signal}` : `exit code ${code}`;
    if (this.stopping) {
      // Drained: exit 0, or a signal that reached it before it could listen for one.
      if (!(code === 0 || signal === 'SIGTERM' || signal === 'SIGINT')) {
        this.unclean = true;
        this.logger.error({ child: role.spec.name, code, signal }, `${role.spec.name} did not drain cleanly (${how})`);
      }
      this.settle();
      return;
    }
    const reason = describeStderr(role.stderr);
    const decision = decideRestart(role.history, { started: role.started, ranMs: Date.now() - role.spawnedAt }, this.policy);
    role.history = decision.history;
    const fields = { child: role.spec.name, childPid: child.pid, code, signal, started: role.started, ...(reason !== null && { stderr: reason }) };
    if (decision.action === 'give-up') {
      this.failure = `switchboard start: ${role.spec.name} could not start (${decision.history.startFailures} attempts in a row, the last ${how}): ${reason ?? how}`;
      this.logger.error(fields, `${role.spec.name} could not start (${decision.history.startFailures} attempts in a row): ${reason ?? how}; stopping every process`);
      this.stop('give-up');
      return;
    }
    this.logger.warn({ ...fields, restartInMs: decision.delayMs }, `${role.spec.name} exited unexpectedly (${how}); restarting it in ${decision.delayMs} ms`);
    role.restart = setTimeout(() => this.spawn(role), decision.delayMs);
  }

  /**
   * SIGTERM to every child, SIGKILL to those still there after `drainMs`. Signals after the first
   * change nothing: under `npm start` a Ctrl-C arrives twice (from the terminal and from npm).
   */
  stop(why: NodeJS.Signals | 'give-up'): void {
    if (this.stopping) return;
    this.stopping = true;
    this.logger.info({ ...(why !== 'give-up' && { signal: why }) }, 'stopping every process');
    for (const role of this.roles) {
      if (role.restart) clearTimeout(role.restart);
      role.restart = null;
      role.child?.kill('SIGTERM');
    }
    this.force = setTimeout(() => {
      this.logger.error({ processes: this.roles.filter((r) => r.child).map((r) => r.spec.name) }, `processes still draining after ${this.drainMs / 1000} s: killing them`);
      this.killAll();
    }, this.drainMs);
    this.settle();
  }

  private killAll(): void {
    for (const role of this.roles) {
      if (role.child) {
        this.unclean = true;
        role.child.kill('SIGKILL');
      }
    }
  }

  private settle(): void {
    if (!this.stopping || this.roles.some((r) => r.child)) return;
    if (this.force) clearTimeout(this.force);
    this.logger.info('switchboard stopped');
    this.finish(this.failure || this.unclean ? 1 : 0);
  }
}

/** A child's last words: its last stderr lines without stack frames, or null when it said nothing. */
export function describeStderr(lines: readonly string[]): string | null {
  const words = lines.map((l) => l.trim()).filter((l) => l !== '' && !/^at /.test(l));
  return words.length ? words.slice(-3).join(' ') : null;
}
