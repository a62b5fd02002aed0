/**
 * The deployment files, checked as far as a machine without Docker can: docker-compose.yml against
 * the Compose Specification's JSON schema (vendored: test/support/compose-spec.json), with its
 * required secrets; the Dockerfile's stages, user, health check and the files it copies; then a dry
 * run of the image: the build the Dockerfile runs, laid out as its last stage lays it out, with only
 * production dependencies imported, and every compose service's command started from there with
 * the compose environment (release first), checked healthy, and stopped with SIGTERM. The Procfile's
 * lines run as Procfile runners run them (bash; dash with the process group signalled).
 *
 * Not run here (no Docker daemon or Compose): `docker build` itself, the Postgres and Redis images,
 * the container network and `npm ci --omit=dev` (the dry run uses the checkout's node_modules,
 * and checks instead that the compiled service imports no dev dependency).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { Ajv } from 'ajv';
import { createTestDatabase, deleteRedisPrefix, uniqueName, REDIS_URL } from '../support/harness.js';
import { procfileCommands } from '../../scripts/bench/stack.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const COMPOSE_TEXT = readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
const DOCKERFILE = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
const PROCFILE = readFileSync(path.join(root, 'Procfile'), 'utf8');
const APP_ROLES = ['web', 'worker_sms', 'worker_channels', 'worker_priority', 'worker_status', 'worker_webhooks'];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

/**
 * Compose interpolation (`${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
 * `${VAR?error}`, `$$`) of every string of the parsed file (as Compose does it: after parsing, so
 * `false` stays the string "false"), throwing on a missing required variable.
 */
function interpolate(text: string, env: Record<string, string | undefined>): Doc {
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return interpolateString(value, env);
    if (Array.isArray(value)) return value.map(walk);
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v)]));
    return value;
  };
  return walk(parseYaml(text, { merge: true }));
}

function interpolateString(text: string, env: Record<string, string | undefined>): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}/g, (whole, name: string | undefined, colon: string, op: string, arg: string) => {
    if (whole === '$$') return '$';
    const value = env[name!];
    const unset = value === undefined || (colon === ':' && value === '');
    if (op === '?' && unset) throw new Error(`required variable ${name} is missing a value: ${arg}`);
    if (op === '-' && unset) return arg;
    return value ?? '';
  });
}

const SECRETS = {
  ADMIN_TOKEN: randomBytes(24).toString('hex'),
  CREDENTIALS_KEY: randomBytes(32).toString('hex'),
  POSTGRES_PASSWORD: randomBytes(16).toString('hex'),
};

test('docker-compose.yml is a valid Compose file, before and after interpolation', () => {
  const schema = JSON.parse(readFileSync(path.join(root, 'test/support/compose-spec.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(schema.title, 'Compose Specification');
  // Draft-07 is ajv's own dialect; the schema names it by an https URL ajv does not register.
  delete schema.$schema;
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validate = ajv.compile(schema);
  for (const doc of [parseYaml(COMPOSE_TEXT, { merge: true }) as Doc, interpolate(COMPOSE_TEXT, SECRETS)]) {
    assert.ok(validate(doc), ajv.errorsText(validate.errors, { separator: '\n' }));
  }
});

test('its required secrets are refused by name when missing; the defaults are safe for production', () => {
  for (const name of Object.keys(SECRETS)) {
    const without = { ...SECRETS, [name]: undefined };
    assert.throws(() => interpolate(COMPOSE_TEXT, without), new RegExp(`required variable ${name} is missing a value: set ${name}`));
    assert.throws(() => interpolate(COMPOSE_TEXT, { ...without, [name]: '' }), new RegExp(name), `${name}=""`);
  }
  const doc = interpolate(COMPOSE_TEXT, SECRETS);
  for (const role of [...APP_ROLES, 'release']) {
    const env = doc.services[role].environment as Record<string, string>;
    assert.equal(env.NODE_ENV, 'production', role);
    assert.equal(env.SANDBOX, 'false', `${role}: the sandbox is off unless SANDBOX is set`);
    assert.equal(env.ADMIN_TOKEN, SECRETS.ADMIN_TOKEN);
    assert.equal(env.CREDENTIALS_KEY, SECRETS.CREDENTIALS_KEY);
    assert.match(env.DATABASE_URL!, new RegExp(`^postgres://switchboard:${SECRETS.POSTGRES_PASSWORD}@postgres:5432/switchboard$`));
  }
  assert.equal(doc.services.postgres.environment.POSTGRES_PASSWORD, SECRETS.POSTGRES_PASSWORD);
});

test('compose: Redis keeps an append-only file and never evicts; the release step runs once before every role', () => {
  const doc = interpolate(COMPOSE_TEXT, SECRETS);
  const redis = (doc.services.redis.command as string[]).join(' ');
  assert.match(redis, /--appendonly yes/);
  assert.match(redis, /--maxmemory-policy noeviction/);
  assert.deepEqual(doc.services.release.command, ['migrate']);
  assert.equal(doc.services.release.restart, 'no');
  for (const role of APP_ROLES) {
    const service = doc.services[role];
    assert.equal(service.build, '.', `${role} builds the image from the clone`);
    assert.equal(service.image, 'switchboard:local');
    assert.equal(service.init, true, `${role}: an init process reaps and forwards signals`);
    assert.deepEqual(service.depends_on.release, { condition: 'service_completed_successfully' }, role);
    assert.deepEqual(service.depends_on.postgres, { condition: 'service_healthy' }, role);
    assert.ok(Array.isArray(service.command) && !service.command.includes('npm'), `${role} runs the compiled service, not npm`);
  }
  assert.deepEqual(Object.keys(doc.services).sort(), ['postgres', 'redis', 'release', ...APP_ROLES].sort());
});

interface Stage { name: string; from: string; lines: string[] }

function stages(dockerfile: string): Stage[] {
  const out: Stage[] = [];
  for (const raw of dockerfile.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) {
      out.push({ name: from[2] ?? String(out.length), from: from[1]!, lines: [] });
      continue;
    }
    out.at(-1)?.lines.push(line);
  }
  return out;
}

test('Dockerfile: built with dev dependencies, run with production ones as a non-root user, with a health check', () => {
  const all = stages(DOCKERFILE);
  assert.ok(all.length >= 3, 'multi-stage');
  const build = all.find((s) => s.lines.some((l) => /^RUN npm run build$/.test(l)))!;
  assert.ok(build.lines.some((l) => /^RUN npm ci\b(?!.*--omit=dev)/.test(l)), 'the build stage installs dev dependencies');
  const deps = all.find((s) => s.lines.some((l) => /^RUN npm ci .*--omit=dev/.test(l)))!;
  assert.ok(deps, 'a stage installs production dependencies only');
  const runtime = all.at(-1)!;
  assert.ok(runtime.lines.includes(`COPY --from=${deps.name} /app/node_modules ./node_modules`));
  assert.ok(runtime.lines.includes(`COPY --from=${build.name} /app/dist ./dist`));
  assert.ok(runtime.lines.some((l) => /^USER (?!root\b|0\b)\S+$/.test(l)), 'a non-root user');
  assert.ok(runtime.lines.some((l) => /^HEALTHCHECK .*CMD \["node", "dist\/bin\/healthcheck\.js"\]$/.test(l)));
  assert.ok(runtime.lines.includes('ENTRYPOINT ["bin/switchboard"]'));
  assert.ok(!runtime.lines.some((l) => /^RUN npm (ci|install|run)/.test(l)), 'nothing is installed or built in the final stage');
  // Every file copied from the build context exists in the clone (and is not excluded by .dockerignore).
  const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const stage of all) {
    for (const line of stage.lines) {
      const copy = /^COPY\s+(?!--from)(?:--\S+\s+)*(.+)\s+\S+$/.exec(line);
      if (!copy) continue;
      for (const source of copy[1]!.split(/\s+/)) {
        assert.ok(existsSync(path.join(root, source)), `${line}: ${source} exists`);
        assert.ok(!ignored.includes(source.split('/')[0]!), `${line}: ${source} is not in .dockerignore`);
      }
    }
  }
});

// ---------------------------------------------------------------------------------------------
// The dry run of the image
// ---------------------------------------------------------------------------------------------

let image: string;
let databaseUrl: string;
let dropDatabase: () => Promise<void>;
const prefixes: string[] = [];

before(async () => {
  // The Dockerfile's `RUN npm run build`, into a directory of its own (tests may run the checkout's dist/).
  const work = mkdtempSync(path.join(tmpdir(), 'sb-image-'));
  image = path.join(work, 'app');
  mkdirSync(path.join(image, 'scripts'), { recursive: true });
  mkdirSync(path.join(image, 'bin'), { recursive: true });
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', path.join(image, 'dist')], { cwd: root, encoding: 'utf8' });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  const assets = spawnSync(process.execPath, ['scripts/copy-assets.mjs', path.join(image, 'dist')], { cwd: root, encoding: 'utf8' });
  assert.equal(assets.status, 0, assets.stderr);
  // The final stage's other COPY lines; node_modules stands in for the production install.
  cpSync(path.join(root, 'package.json'), path.join(image, 'package.json'));
  cpSync(path.join(root, 'scripts/node-flags'), path.join(image, 'scripts/node-flags'));
  cpSync(path.join(root, 'bin/switchboard'), path.join(image, 'bin/switchboard'));
  symlinkSync(path.join(root, 'node_modules'), path.join(image, 'node_modules'));
  const db = await createTestDatabase();
  databaseUrl = db.url;
  dropDatabase = db.drop;
});

after(async () => {
  if (image) rmSync(path.dirname(image), { recursive: true, force: true });
  await dropDatabase?.();
  for (const prefix of prefixes) await deleteRedisPrefix(prefix);
});

/** Bare package names imported by the compiled files reachable from `entry` (relative imports followed). */
function packagesImported(entry: string): Set<string> {
  const seen = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
      const spec = (m[1] ?? m[2])!;
      if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec));
      else if (!spec.startsWith('node:') && !builtinModules.includes(spec)) packages.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
    }
  };
  visit(entry);
  return packages;
}

test('the compiled entries exist and import production dependencies only', () => {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  for (const entry of ['dist/bin/switchboard.js', 'dist/bin/healthcheck.js', 'dist/shared/db/migrations/001_init.sql']) {
    assert.ok(existsSync(path.join(image, entry)), `${entry} is built`);
  }
  const used = packagesImported(path.join(image, 'dist/bin/switchboard.js'));
  const dev = [...used].filter((p) => !(p in pkg.dependencies));
  assert.deepEqual(dev, [], 'imported but not a production dependency (npm ci --omit=dev would leave it out)');
  assert.ok(used.has('express') && used.has('prom-client'));
  assert.ok(statSync(path.join(image, 'bin/switchboard')).mode & 0o111, 'the entry is executable');
});

interface Running {
  name: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function start(name: string, command: string, args: string[], env: Record<string, string>, cwd: string, opts: { detached?: boolean } = {}): Running {
  const child = spawn(command, args, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    output += d.toString();
  });
  // 'close', not 'exit': a process's last lines (a drained shutdown's) may still be in the pipe when
  // it has exited; 'close' comes once its output has ended too.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { name, child, output: () => output, exited };
}

async function until(run: Running, re: RegExp, timeoutMs = 90_000): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = re.exec(run.output());
    if (m) return m;
    if (run.child.exitCode !== null) assert.fail(`${run.name} exited ${run.child.exitCode} before ${re}:\n${run.output().slice(-3000)}`);
    if (Date.now() > deadline) assert.fail(`${run.name}: ${re} not seen within ${timeoutMs} ms:\n${run.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function serviceEnv(composeEnv: Record<string, string>): Record<string, string> {
  const prefix = uniqueName('sbdeploy');
  prefixes.push(prefix);
  // The compose network's host names stand for this machine's Postgres and Redis; every process
  // shares one host here, so ports are taken as they come (in the containers they are fixed).
  return { ...composeEnv, DATABASE_URL: databaseUrl, REDIS_URL, REDIS_PREFIX: prefix, PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'info' };
}

/** Waits for the process to exit (a timer that does not hold the test file open). */
function exitWithin(run: Running, ms: number): Promise<number | null | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([run.exited, new Promise<'hung'>((r) => {
    timer = setTimeout(() => r('hung'), ms);
    timer.unref();
  })]).finally(() => clearTimeout(timer));
}

test('the compose services\' commands from the image layout and the Procfile\'s lines: release once, every role healthy, SIGTERM drains each', { timeout: 170_000 }, async () => {
  const doc = interpolate(COMPOSE_TEXT, SECRETS);
  const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(DOCKERFILE)![1]!) as string[];
  const runtimeEnv = Object.fromEntries([...DOCKERFILE.matchAll(/^ENV (.+)$/gm)].at(-1)![1]!.split(/\s+/).map((kv) => kv.split('=') as [string, string]));
  const composeRun = (role: string) => start(`compose ${role}`, path.join(image, entrypoint[0]!), [...entrypoint.slice(1), ...doc.services[role].command],
    serviceEnv({ ...runtimeEnv, ...doc.services[role].environment }), image);

  // The Procfile runs in a checkout: the image's build stands in for its dist/.
  const lines = procfileCommands(PROCFILE);
  assert.deepEqual(lines.map(([name]) => name), ['release', ...APP_ROLES], 'every line is `<role>: node $(cat scripts/node-flags) dist/bin/switchboard.js <args>`');
  const text = new Map(PROCFILE.split('\n').filter(Boolean).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
  const checkout = mkdtempSync(path.join(tmpdir(), 'sb-procfile-'));
  for (const entry of ['package.json', 'scripts', 'bin']) cpSync(path.join(image, entry), path.join(checkout, entry), { recursive: true });
  symlinkSync(path.join(image, 'dist'), path.join(checkout, 'dist'));
  symlinkSync(path.join(root, 'node_modules'), path.join(checkout, 'node_modules'));
  const production = { NODE_ENV: 'production', ...SECRETS, SANDBOX: 'false' };
  const procfileRun = (role: string, shell: 'bash' | 'sh') =>
    start(`Procfile ${role} (${shell})`, shell, ['-c', text.get(role)!], serviceEnv(production), checkout, { detached: shell === 'sh' });

  try {
    const release = composeRun('release');
    assert.equal(await release.exited, 0, release.output());
    assert.match(release.output(), /^\{"applied":\["001_init\.sql",/m);
    const procfileRelease = procfileRun('release', 'bash');
    assert.equal(await procfileRelease.exited, 0, procfileRelease.output());
    assert.match(procfileRelease.output(), /^\{"applied":\[\]\}$/m, 'a second release step applies nothing');

    const compose = APP_ROLES.map(composeRun);
    const procfile = APP_ROLES.map((role) => procfileRun(role, 'bash'));
    const dash = procfileRun('web', 'sh');
    try {
      for (const run of [...compose, ...procfile, dash]) await until(run, /"msg":"switchboard started"/);
      for (const run of [...compose, ...procfile]) {
        // The workers that dispatch bulk lanes alone yield the CPU (BULK_WORKER_NICE, 10); the rest keep theirs.
        const bulk = /worker_(sms|channels)\b/.test(run.name);
        if (bulk) await until(run, /BULK_WORKER_NICE/);
        const nice = Number(readFileSync(`/proc/${run.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[16]);
        assert.equal(nice, bulk ? 10 : 0, `${run.name}: nice`);
      }
      for (const run of [...compose, ...procfile]) {
        // The wrapper and bash exec'd node: the pid that is signalled is node's, with scripts/node-flags.
        const cmdline = readFileSync(`/proc/${run.child.pid}/cmdline`, 'utf8').split('\0');
        assert.match(cmdline[0]!, /node$/, `${run.name}: ${cmdline.join(' ')}`);
        assert.ok(cmdline.includes('--max-semi-space-size=32'), `${run.name} runs with scripts/node-flags`);
      }
      for (const run of compose) {
        const port = (await until(run, /"port":(\d+),"msg":"metrics listening"/))[1]!;
        const check = spawnSync(process.execPath, ['dist/bin/healthcheck.js'], { cwd: image, env: { ...process.env, METRICS_PORT: port }, encoding: 'utf8', timeout: 20_000 });
        assert.equal(check.status, 0, `${run.name}: the image's HEALTHCHECK`);
      }
      const port = (await until(compose[0]!, /"port":(\d+)[^\n]*"msg":"HTTP listening"/))[1]!;
      assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
    } finally {
      const direct = [...compose, ...procfile].map(async (run) => {
        if (run.child.exitCode !== null) return;
        run.child.kill('SIGTERM');
        assert.equal(await exitWithin(run, 45_000), 0, `${run.name} after SIGTERM:\n${run.output().slice(-3000)}`);
        assert.match(run.output(), /"msg":"shutting down"/, `${run.name} drained`);
        assert.match(run.output(), /"msg":"switchboard stopped"/, `${run.name} stopped`);
      });
      // foreman and honcho signal the process group of a line they started with /bin/sh: dash
      // itself ends at once, node drains and then closes the output it shares.
      const group = (async () => {
        const closed = new Promise<void>((resolve) => dash.child.once('close', () => resolve()));
        process.kill(-dash.child.pid!, 'SIGTERM');
        await Promise.race([closed, new Promise((r) => setTimeout(r, 45_000).unref())]);
        assert.match(dash.output(), /"msg":"switchboard stopped"/, `dash: node drained:\n${dash.output().slice(-2000)}`);
      })();
      await Promise.all([...direct, group]);
    }
  } finally {
    rmSync(checkout, { recursive: true, force: true });
  }
});
