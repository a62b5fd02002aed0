/**
 * Configuration from the environment, validated once at start. Every problem is listed with the
 * variable's name, so a bad deployment fails with a message an operator can act on. No other
 * module reads `process.env`.
 */
import Joi from 'joi';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { FAMILIES, type Family } from './channels/index.js';
import { SMS_SENDER, SMS_SENDER_RULE } from './channels/sms.js';
import type { RedisClusterTarget } from './redis.js';

export interface Config {
  /** `NODE_ENV === 'production'`; everything else counts as development (D11). */
  production: boolean;
  /** HTTP port (default 8080). */
  port: number;
  /**
   * How long a client may take to send a whole request, headers and body (HTTP_REQUEST_TIMEOUT_MS,
   * default 30000; the headers alone get at most 15 s of it): a slower one is answered 408 and its
   * connection closed, so slow clients cannot hold the API's connections for Node's 5 minutes.
   */
  httpRequestTimeoutMs: number;
  /** Postgres connection string (default postgres://127.0.0.1:5432/switchboard). */
  databaseUrl: string;
  /** Redis connection string (default redis://127.0.0.1:6379); unused when `redisCluster` is set. */
  redisUrl: string;
  /** A Redis Cluster's seed nodes (REDIS_CLUSTER_NODES), or null: one Redis at `redisUrl`. */
  redisCluster: RedisClusterTarget | null;
  /** Prefix for every Redis key and BullMQ queue (default `sb`); tests use one per run. */
  redisPrefix: string;
  /** Base URL used to build links (default http://localhost:8080). */
  publicUrl: string;
  /** Bearer token of the admin API and bull-board; unset refuses every admin call. */
  adminToken: string | null;
  /** Built-in sandbox carrier (D10): default on in development, off in production. */
  sandbox: boolean;
  /** Allow callbacks to private/loopback addresses: default on in development, off in production. */
  allowPrivateCallbacks: boolean;
  /** SMS sender when neither the step nor the account names one. */
  defaultSender: string;
  /** pino level. */
  logLevel: string;
  /** Single SMPP connection (`smpp://…`), optional. */
  smppUrl: string | null;
  /** Meta Graph's base URL for WhatsApp connections that name none (tests point it at the simulator). */
  whatsappGraphUrl: string;
  /** Graph API version for WhatsApp connections that name none (`vNN.N`). */
  whatsappGraphVersion: string;
  /**
   * Worker concurrency per pool: one dispatch pool per channel family (`<FAMILY>_CONCURRENCY`);
   * `status` is the number of status partitions (the same in every process).
   */
  concurrency: Record<Family, number> & { status: number; webhooks: number };
  /** Webhook retry delays in ms (D4); overridable for tests. */
  webhookRetryScheduleMs: number[];
  /** Maximum events of one webhook POST and how long events may wait for company (D4). */
  webhookBatchMax: number;
  webhookLingerMs: number;
  /** Size of a process's main Postgres pool; null: by role (all 20, web 16, worker 10). */
  dbPoolSize: number | null;
  /** Bulk accept writes (calls with any non-priority message) running at once per process. */
  acceptBulkConcurrency: number;
  /** Batch calls over 2 KB parsed, checked and written at once per API process while small calls come (small calls skip the turns). */
  acceptLargeCallConcurrency: number;
  /** The same once no small call has come to the API process for a minute (shared/sending/large-call-turns.ts). */
  acceptLargeCallConcurrencyAlone: number;
  /** Nice value a worker that dispatches bulk lanes only takes at start (services/cpu-priority.ts); 0: none. */
  bulkWorkerNice: number;
  /** Bytes of large calls' bodies that may wait for a turn per API process; a call beyond them gets 429. */
  acceptLargeCallBacklogBytes: number;
  /** How often the outbox relay reads the outbox from its start (a transaction held open past its floor). */
  webhookRelayRescanMs: number;
  /** Bytes of webhook batches the relay keeps waiting for a receiver's slot (the rest go to the queue). */
  webhookDirectBacklogBytes: number;
  /** Sandbox delay of the `04` outcome (D10: 5 s). */
  sandboxSlowDeliveryMs: number;
  /** How often the recovery sweep looks for work that Redis lost. */
  recoverySweepMs: number;
  /** How long an attempt may wait for its carrier before the sweep settles it (RECEIPT_WAIT_HOURS, default 72). */
  receiptWaitHours: number;
  /**
   * How long events and webhook batches are kept (EVENT_RETENTION_DAYS, default 0: forever); the
   * sweep deletes older ones no delivery needs any more (shared/webhooks/retention.ts).
   */
  eventRetentionDays: number;
  /**
   * How long the records of sent messages and inbound messages are kept (MESSAGE_RETENTION_DAYS,
   * default 0: forever; else at least MIN_MESSAGE_RETENTION_DAYS, and at least EVENT_RETENTION_DAYS
   * when that is set); the sweep deletes older messages whose work is over, with all their rows
   * (shared/engine/message-retention.ts). Events are then kept no longer (`eventRetentionDaysOf`).
   */
  messageRetentionDays: number;
  /**
   * Lanes (as lane numbers: 0 priority, 1 transactional, 2 promotional) whose attempts are never
   * sent twice after a crash or an unanswered submit (AT_MOST_ONCE_LANES, names; default none:
   * every lane at-least-once).
   */
  atMostOnceLanes: number[];
  /** How long a dispatch job's lock lasts without renewal: a dead worker's jobs are taken over after about this (DISPATCH_LOCK_MS, default 10000; the priority lane half). */
  dispatchLockMs: number;
  /**
   * MIGRATE_ON_START: true/false, or null when unset: then only the all-in-one process (`all`)
   * and every process outside production migrate at start; production `web` and `worker`
   * processes wait for the schema the release step (`switchboard migrate`) applies.
   */
  migrateOnStart: boolean | null;
  /** How long a process that does not migrate waits for the schema before it gives up (SCHEMA_WAIT_SECONDS, default 300). */
  schemaWaitMs: number;
  /** Sandbox on in production because SANDBOX=true was set there (it is then logged as a warning at start). */
  sandboxInProduction: boolean;
  /** A listener of its own for /metrics and /health/* (METRICS_PORT), or null; the web process also serves them on PORT. */
  metricsPort: number | null;
  /** Bearer token `/metrics` asks for (METRICS_TOKEN), or null: open. */
  metricsToken: string | null;
  /**
   * The 32-byte key carrier credentials are sealed with (CREDENTIALS_KEY: 64 hex characters or
   * base64). Required in production; in development a fixed development key stands in (a warning
   * says so at start).
   */
  credentialsKey: Buffer;
  credentialsKeyIsDevelopmentDefault: boolean;
  /** The whatsapp carrier connection partner onboarding (D7) uses when several are enabled (WHATSAPP_ONBOARDING_CONNECTION). */
  whatsappOnboardingConnection: string | null;
  /** Where the onboarding page loads Embedded Signup from instead of Meta's JS SDK (WHATSAPP_SDK_URL: the simulator's `/_sim/sdk.js`). */
  whatsappSdkUrl: string | null;
}

/**
 * Dispatch jobs a process runs at once per pool and lane. SMS: with the worker's 10 connections,
 * jobs waiting for submit responses overlap with jobs in their transactions (docs/benchmarks.md).
 */
const DEFAULT_POOL_CONCURRENCY: Record<Family, number> = { sms: 16, viber: 4, whatsapp: 4 };
const concurrencyVariable = (family: Family): string => `${family.toUpperCase()}_CONCURRENCY`;

const bool = Joi.boolean().truthy('1').falsy('0').sensitive(false);
const list = Joi.string().pattern(/^\d+(,\d+)*$/);

/**
 * A URL Joi's `uri()` accepts that Node's URL parser (what pg and ioredis read it with) refuses, a
 * port beyond 65535 for one: refused here, naming the variable, rather than a TypeError at connect.
 * The value itself is never in the message (it may hold a password).
 */
function parsableUrl(value: string, helpers: Joi.CustomHelpers): string | Joi.ErrorReport {
  return URL.canParse(value) ? value : helpers.error('url.unparsable');
}

/** REDIS_URL's path is a database number (`/0`) or nothing: ioredis sends SELECT NaN for any other. */
function redisDatabasePath(value: string, helpers: Joi.CustomHelpers): string | Joi.ErrorReport {
  return !URL.canParse(value) || /^\/?(\d+)?$/.test(new URL(value).pathname) ? value : helpers.error('url.redisDatabase');
}

const URL_MESSAGES = {
  'url.unparsable': 'is not a URL that can be read (a port of 0 to 65535; %-escape reserved characters of the user name and password)',
  'url.redisDatabase': 'must name a database by its number as its path (redis://host:6379/0), or none',
};

const schema = Joi.object({
  NODE_ENV: Joi.string().valid('production', 'development', 'test').default('development'),
  PORT: Joi.number().integer().min(0).max(65535).default(8080),
  HTTP_REQUEST_TIMEOUT_MS: Joi.number().integer().min(1000).max(600_000).default(30_000),
  DATABASE_URL: Joi.string().uri({ scheme: ['postgres', 'postgresql'] }).custom(parsableUrl)
    .messages(URL_MESSAGES).default('postgres://127.0.0.1:5432/switchboard'),
  REDIS_URL: Joi.string().uri({ scheme: ['redis', 'rediss'] }).custom(parsableUrl).custom(redisDatabasePath)
    .messages(URL_MESSAGES).default('redis://127.0.0.1:6379'),
  REDIS_CLUSTER_NODES: Joi.string().allow(''),
  REDIS_PREFIX: Joi.string().pattern(/^[A-Za-z0-9_-]{1,40}$/).default('sb'),
  PUBLIC_URL: Joi.string().uri({ scheme: ['http', 'https'] }).custom(parsableUrl).messages(URL_MESSAGES).default('http://localhost:8080'),
  ADMIN_TOKEN: Joi.string().min(16).allow(''),
  SANDBOX: bool,
  ALLOW_PRIVATE_CALLBACKS: bool,
  DEFAULT_SENDER: Joi.string().pattern(SMS_SENDER).messages({ 'string.pattern.base': SMS_SENDER_RULE }).default('Info'),
  LOG_LEVEL: Joi.string().valid('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent').default('info'),
  SMPP_URL: Joi.string().pattern(/^s?smpps?:\/\//).allow('')
    .messages({ 'string.pattern.base': 'must start with smpp://, smpps:// or ssmpp:// (smpp://system_id:password@host:port)' }),
  WHATSAPP_GRAPH_URL: Joi.string().uri({ scheme: ['http', 'https'] }).custom(parsableUrl).messages(URL_MESSAGES).default('https://graph.facebook.com'),
  WHATSAPP_GRAPH_VERSION: Joi.string().pattern(/^v\d+\.\d+$/).default('v25.0').messages({ 'string.pattern.base': 'must look like v25.0' }),
  ...Object.fromEntries(FAMILIES.map((f) => [concurrencyVariable(f), Joi.number().integer().min(1).max(1000).default(DEFAULT_POOL_CONCURRENCY[f])])),
  STATUS_PARTITIONS: Joi.number().integer().min(1).max(64).default(4),
  WEBHOOK_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(32),
  WEBHOOK_RETRY_SCHEDULE_MS: list,
  WEBHOOK_BATCH_MAX: Joi.number().integer().min(1).max(100).default(100),
  WEBHOOK_LINGER_MS: Joi.number().integer().min(0).max(1000).default(200),
  ACCEPT_BULK_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(8),
  ACCEPT_LARGE_CALL_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(2),
  ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: Joi.number().integer().min(1).max(1000),
  ACCEPT_LARGE_CALL_BACKLOG_MB: Joi.number().integer().min(1).max(4096).default(32),
  BULK_WORKER_NICE: Joi.number().integer().min(0).max(19).default(10),
  DB_POOL_SIZE: Joi.number().integer().min(2).max(1000),
  WEBHOOK_RELAY_RESCAN_MS: Joi.number().integer().min(1000).max(3_600_000).default(15_000),
  WEBHOOK_DIRECT_BACKLOG_MB: Joi.number().integer().min(0).max(4096).default(64),
  // Timers: Node runs a delay over 2^31 - 1 ms after 1 ms instead (the sweep would spin).
  SANDBOX_SLOW_DELIVERY_MS: Joi.number().integer().min(0).max(3_600_000).default(5000),
  RECOVERY_SWEEP_MS: Joi.number().integer().min(100).max(86_400_000).default(30000),
  RECEIPT_WAIT_HOURS: Joi.number().min(0.001).max(24 * 365).default(72),
  // 0: kept forever (as before the setting existed: an upgrade deletes nothing by surprise).
  EVENT_RETENTION_DAYS: Joi.number().min(0).max(3650).default(0),
  // 0: kept forever, as for events; else at least MIN_MESSAGE_RETENTION_DAYS (checked below).
  MESSAGE_RETENTION_DAYS: Joi.number().min(0).max(3650).default(0),
  AT_MOST_ONCE_LANES: Joi.string().allow('').pattern(/^(priority|transactional|promotional)(,(priority|transactional|promotional))*$/)
    .messages({ 'string.pattern.base': 'must be a comma-separated list of priority, transactional, promotional' }),
  DISPATCH_LOCK_MS: Joi.number().integer().min(2000).max(300_000).default(10_000),
  MIGRATE_ON_START: bool,
  SCHEMA_WAIT_SECONDS: Joi.number().integer().min(0).max(86_400).default(300),
  METRICS_PORT: Joi.number().integer().min(0).max(65535),
  METRICS_TOKEN: Joi.string().min(16).allow(''),
  CREDENTIALS_KEY: Joi.string().allow('').custom((v: string, helpers) => (v === '' || parseKey(v) ? v : helpers.error('any.invalid')))
    .messages({ 'any.invalid': 'must be 32 bytes as 64 hex characters or base64 (e.g. `openssl rand -hex 32`)' }),
  WHATSAPP_ONBOARDING_CONNECTION: Joi.string().pattern(/^[A-Za-z0-9_-]{1,40}$/).allow(''),
  WHATSAPP_SDK_URL: Joi.string().uri({ scheme: ['http', 'https'] }).custom(parsableUrl).messages(URL_MESSAGES).allow(''),
}).unknown(true);

/** Joi's messages that quote the refused value, reworded without it (see loadConfig). */
const VALUE_FREE_MESSAGES = {
  'string.pattern.base': '{{#label}} fails to match the required pattern: {{#regex}}',
  'string.pattern.name': '{{#label}} fails to match the {{#name}} pattern',
  'string.pattern.invert.base': '{{#label}} matches the inverted pattern: {{#regex}}',
  'string.pattern.invert.name': '{{#label}} matches the inverted {{#name}} pattern',
};

/** 32 bytes from 64 hex characters or base64 (standard or url-safe), else null. */
function parseKey(text: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const key = Buffer.from(text, 'base64');
    return key.length === 32 ? key : null;
  }
  return null;
}

/** What development runs use without a CREDENTIALS_KEY: known to everyone, so only for development. */
const DEVELOPMENT_CREDENTIALS_KEY = createHash('sha256').update('switchboard development credentials key').digest();

export const PRODUCTION_ADMIN_TOKEN_LENGTH = 32;

/**
 * Why an admin token is too weak for production, or null: shorter than 32 characters, one of the
 * placeholders from examples (`change-me…`), or a single repeated character.
 */
export function weakAdminToken(token: string): string | null {
  if (/change.?me|example|placeholder|default|your.?(admin.?)?token/i.test(token)) return 'is a placeholder from an example';
  if (token.length < PRODUCTION_ADMIN_TOKEN_LENGTH) return `is shorter than ${PRODUCTION_ADMIN_TOKEN_LENGTH} characters`;
  if (new Set(token).size < 8) return 'has too few distinct characters';
  return null;
}

/**
 * The shortest MESSAGE_RETENTION_DAYS (other than 0, forever): a week. It covers what refers to a
 * message for days after it was sent: an account's reply window is 7 days unless changed (a reply
 * is matched to the latest message sent to its number within it, which must still be stored); an
 * idempotency key answers a repeated call with its messages' ids for 24 hours; Meta delivers a
 * WhatsApp webhook again until it is answered (for about a day, its documentation says, "though
 * this may vary"), and an inbound message delivered again is recognised by its stored row. (A
 * carrier's reports are not among these: a message whose attempts may still hear from their
 * carrier is kept however old, see engine/message-retention.ts.)
 */
export const MIN_MESSAGE_RETENTION_DAYS = 7;

/**
 * What is wrong with MESSAGE_RETENTION_DAYS beside EVENT_RETENTION_DAYS (both already numbers in
 * range), as problems to report. A message's events go with it, so a message retention shorter
 * than the event retention would cut that short: refused, rather than one setting quietly
 * overriding the other.
 */
function messageRetentionProblems(messageDays: number, eventDays: number): string[] {
  if (messageDays === 0) return [];
  if (messageDays < MIN_MESSAGE_RETENTION_DAYS) {
    return [`MESSAGE_RETENTION_DAYS: must be 0 (keep forever) or at least ${MIN_MESSAGE_RETENTION_DAYS} (days): replies are matched ` +
      `to messages of the last 7 days by default (an account's reply_window_days), and idempotency keys and WhatsApp's redelivered ` +
      `webhooks refer to them for a day or so`];
  }
  if (eventDays > 0 && messageDays < eventDays) {
    return [`MESSAGE_RETENTION_DAYS: must be at least EVENT_RETENTION_DAYS (${eventDays}) when both are set: a message's events are deleted ` +
      `with it, so a shorter message retention would cut the event retention short`];
  }
  return [];
}

/**
 * How long events and webhook batches are kept: EVENT_RETENTION_DAYS, or when that is 0 (unset),
 * MESSAGE_RETENTION_DAYS: events carry the messages' numbers and texts (inbound events theirs
 * alone), so they are never kept longer than the messages. 0: forever.
 */
export function eventRetentionDaysOf(config: Pick<Config, 'eventRetentionDays' | 'messageRetentionDays'>): number {
  return config.eventRetentionDays > 0 ? config.eventRetentionDays : config.messageRetentionDays;
}

/** ACCEPT_LARGE_CALL_CONCURRENCY_ALONE unless set (or ACCEPT_LARGE_CALL_CONCURRENCY when that is larger). */
const DEFAULT_LARGE_CALLS_ALONE = 4;

/** D4: about 10 s, 1 min, 5 min, 15 min, 1 h, 3 h, 6 h, 12 h, 24 h. */
const DEFAULT_RETRY_SCHEDULE_MS = [10e3, 60e3, 300e3, 900e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 24 * 3600e3];

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Validate an environment object (default: `process.env`, after an optional `.env` file). */
export function loadConfig(env: NodeJS.ProcessEnv = readEnv()): Config {
  // A refused value is never repeated in the message: the variables hold secrets (SMPP_URL's
  // password), and the message is printed and logged. Joi's pattern message quotes the value.
  const { value, error } = schema.validate(env, { abortEarly: false, convert: true, messages: VALUE_FREE_MESSAGES });
  if (error) {
    // One problem per variable: the first rule it breaks (a value that is no URL at all is not also an unreadable one).
    const first = error.details.filter((d, i, all) => all.findIndex((o) => o.path[0] === d.path[0]) === i);
    throw new ConfigError(first.map((d) => `${String(d.path[0])}: ${d.message.replace(/^"[^"]+" /, '')}`));
  }
  const production = value.NODE_ENV === 'production';
  const credentialsKey = value.CREDENTIALS_KEY ? parseKey(value.CREDENTIALS_KEY) : null;
  const problems: string[] = [];
  if (production && !credentialsKey) {
    problems.push('CREDENTIALS_KEY: is required in production (32 random bytes as 64 hex characters, e.g. `openssl rand -hex 32`); carrier credentials are sealed with it');
  }
  const adminTokenProblem = production && value.ADMIN_TOKEN ? weakAdminToken(value.ADMIN_TOKEN) : null;
  if (adminTokenProblem) {
    problems.push(`ADMIN_TOKEN: ${adminTokenProblem}; production needs at least ${PRODUCTION_ADMIN_TOKEN_LENGTH} random characters (e.g. \`openssl rand -hex 24\`), or leave it unset to refuse every admin call`);
  }
  let redisCluster: RedisClusterTarget | null = null;
  if (value.REDIS_CLUSTER_NODES) {
    const parsed = parseClusterNodes(String(value.REDIS_CLUSTER_NODES));
    if (typeof parsed === 'string') problems.push(`REDIS_CLUSTER_NODES: ${parsed}`);
    else redisCluster = parsed;
    if (env.REDIS_URL) problems.push('REDIS_URL: set REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both');
  }
  const largeCallsAlone = value.ACCEPT_LARGE_CALL_CONCURRENCY_ALONE ?? Math.max(DEFAULT_LARGE_CALLS_ALONE, value.ACCEPT_LARGE_CALL_CONCURRENCY);
  if (largeCallsAlone < value.ACCEPT_LARGE_CALL_CONCURRENCY) {
    problems.push(`ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: must be at least ACCEPT_LARGE_CALL_CONCURRENCY (${value.ACCEPT_LARGE_CALL_CONCURRENCY}): it is the turns of large calls when no small call needs the narrower ones`);
  }
  problems.push(...messageRetentionProblems(value.MESSAGE_RETENTION_DAYS, value.EVENT_RETENTION_DAYS));
  if (problems.length > 0) {
    throw new ConfigError(problems);
  }
  return Object.freeze({
    production,
    port: value.PORT,
    httpRequestTimeoutMs: value.HTTP_REQUEST_TIMEOUT_MS,
    databaseUrl: withDefaultUser(value.DATABASE_URL),
    redisUrl: value.REDIS_URL,
    redisCluster,
    redisPrefix: value.REDIS_PREFIX,
    publicUrl: value.PUBLIC_URL.replace(/\/$/, ''),
    adminToken: value.ADMIN_TOKEN ? value.ADMIN_TOKEN : null,
    sandbox: value.SANDBOX ?? !production,
    allowPrivateCallbacks: value.ALLOW_PRIVATE_CALLBACKS ?? !production,
    defaultSender: value.DEFAULT_SENDER,
    logLevel: value.LOG_LEVEL,
    smppUrl: value.SMPP_URL ? value.SMPP_URL : null,
    whatsappGraphUrl: value.WHATSAPP_GRAPH_URL,
    whatsappGraphVersion: value.WHATSAPP_GRAPH_VERSION,
    concurrency: {
      ...(Object.fromEntries(FAMILIES.map((f) => [f, value[concurrencyVariable(f)] as number])) as Record<Family, number>),
      status: value.STATUS_PARTITIONS,
      webhooks: value.WEBHOOK_CONCURRENCY,
    },
    webhookRetryScheduleMs: value.WEBHOOK_RETRY_SCHEDULE_MS
      ? String(value.WEBHOOK_RETRY_SCHEDULE_MS).split(',').map(Number)
      : DEFAULT_RETRY_SCHEDULE_MS,
    webhookBatchMax: value.WEBHOOK_BATCH_MAX,
    webhookLingerMs: value.WEBHOOK_LINGER_MS,
    acceptBulkConcurrency: value.ACCEPT_BULK_CONCURRENCY,
    acceptLargeCallConcurrency: value.ACCEPT_LARGE_CALL_CONCURRENCY,
    acceptLargeCallConcurrencyAlone: largeCallsAlone,
    bulkWorkerNice: value.BULK_WORKER_NICE,
    acceptLargeCallBacklogBytes: value.ACCEPT_LARGE_CALL_BACKLOG_MB * 1024 * 1024,
    dbPoolSize: value.DB_POOL_SIZE ?? null,
    webhookRelayRescanMs: value.WEBHOOK_RELAY_RESCAN_MS,
    webhookDirectBacklogBytes: value.WEBHOOK_DIRECT_BACKLOG_MB * 1024 * 1024,
    sandboxSlowDeliveryMs: value.SANDBOX_SLOW_DELIVERY_MS,
    recoverySweepMs: value.RECOVERY_SWEEP_MS,
    receiptWaitHours: value.RECEIPT_WAIT_HOURS,
    eventRetentionDays: value.EVENT_RETENTION_DAYS,
    messageRetentionDays: value.MESSAGE_RETENTION_DAYS,
    atMostOnceLanes: value.AT_MOST_ONCE_LANES ? String(value.AT_MOST_ONCE_LANES).split(',').map((l) => ['priority', 'transactional', 'promotional'].indexOf(l)) : [],
    dispatchLockMs: value.DISPATCH_LOCK_MS,
    migrateOnStart: value.MIGRATE_ON_START ?? null,
    schemaWaitMs: value.SCHEMA_WAIT_SECONDS * 1000,
    // D10: the sandbox is off in production unless SANDBOX is set there explicitly (start logs it).
    sandboxInProduction: production && value.SANDBOX === true,
    metricsPort: value.METRICS_PORT ?? null,
    metricsToken: value.METRICS_TOKEN ? value.METRICS_TOKEN : null,
    credentialsKey: credentialsKey ?? DEVELOPMENT_CREDENTIALS_KEY,
    credentialsKeyIsDevelopmentDefault: credentialsKey === null,
    whatsappOnboardingConnection: value.WHATSAPP_ONBOARDING_CONNECTION ? value.WHATSAPP_ONBOARDING_CONNECTION : null,
    whatsappSdkUrl: value.WHATSAPP_SDK_URL ? value.WHATSAPP_SDK_URL : null,
  });
}

const MAX_PORT = 65535;

/**
 * Why METRICS_PORT cannot serve `roles`, or null: the roles' ports would run past 65535, or one of
 * them would be PORT. `roles` are the processes that open a METRICS_PORT listener, each on
 * METRICS_PORT + its place in the list (a `web` or `all` process: itself alone; `switchboard
 * start`: the Procfile's roles, the web role first), one of which listens on PORT too. It is
 * checked before anything listens: otherwise a role past 65535 fails its own config check and the
 * supervisor restarts it until it gives up, and a second listener on PORT fails with EADDRINUSE,
 * whose words blame another program. Workers alone are not checked (they do not listen on PORT).
 * Port 0 (any free port) never collides.
 */
export function metricsPortCollision(config: Pick<Config, 'port' | 'metricsPort'>, roles: readonly string[]): string | null {
  const { port, metricsPort } = config;
  if (metricsPort === null || metricsPort === 0) return null;
  const last = metricsPort + roles.length - 1;
  if (last > MAX_PORT) {
    return `METRICS_PORT: switchboard start gives each of its ${roles.length} roles METRICS_PORT + its place in the Procfile ` +
      `(${metricsPort} to ${last}), so ${roles[MAX_PORT - metricsPort + 1]} would take ${MAX_PORT + 1}, past the last port (${MAX_PORT}); ` +
      `choose a METRICS_PORT of at most ${MAX_PORT - roles.length + 1}`;
  }
  if (port === 0) return null;
  const index = port - metricsPort;
  if (index < 0 || index >= roles.length) return null;
  if (roles.length === 1) {
    return `METRICS_PORT: ${metricsPort} is also PORT; the metrics listener needs a port of its own: choose another METRICS_PORT, or leave it unset (PORT serves /metrics and /health/* too)`;
  }
  return `METRICS_PORT: switchboard start gives each of its ${roles.length} roles METRICS_PORT + its place in the Procfile ` +
    `(${metricsPort} to ${metricsPort + roles.length - 1}), so ${roles[index]} would take ${port}, which is PORT; ` +
    `choose a METRICS_PORT whose ${roles.length} ports leave PORT out`;
}

/**
 * A URL without a user name connects as the operating-system user, as libpq (psql) does; the pg
 * driver would otherwise take `$USER`, which a service manager or CI may not set.
 */
/**
 * REDIS_CLUSTER_NODES: seed nodes of a Redis Cluster, comma-separated, each `host:port` or a
 * `redis://` / `rediss://` URL (`[user:password@]host:port`, no database: a cluster has only 0).
 * The other nodes are found from the seeds. Credentials and TLS are the cluster's: given on one
 * entry they apply to every node, and entries that give them must agree. Returns the problem as
 * text when the value is not such a list.
 */
export function parseClusterNodes(raw: string): RedisClusterTarget | string {
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.some((e) => e === '')) return 'must be a comma-separated list of host:port (or redis:// URLs) without empty entries';
  const nodes: RedisClusterTarget['nodes'] = [];
  let scheme: string | null = null;
  let username: string | undefined;
  let password: string | undefined;
  for (const entry of entries) {
    const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(entry);
    let url: URL;
    try {
      url = new URL(withScheme ? entry : `redis://${entry}`);
    } catch {
      return `"${redactEntry(entry)}" is not host:port or a redis:// URL`;
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return `"${redactEntry(entry)}": the scheme must be redis:// or rediss://`;
    if (url.hostname === '') return `"${redactEntry(entry)}" names no host`;
    if (!withScheme && url.port === '' && !/:\d+$/.test(entry)) return `"${redactEntry(entry)}" names no port (host:port)`;
    if (url.pathname !== '' && url.pathname !== '/') return `"${redactEntry(entry)}": a Redis Cluster has no databases but 0; leave the path out`;
    if (url.search !== '' || url.hash !== '') return `"${redactEntry(entry)}": no query or fragment`;
    if (scheme !== null && url.protocol !== scheme) return 'every entry must use the same scheme (redis:// or rediss://)';
    scheme = url.protocol;
    const user = url.username ? decodeURIComponent(url.username) : undefined;
    const pass = url.password ? decodeURIComponent(url.password) : undefined;
    if (user !== undefined || pass !== undefined) {
      if ((username !== undefined || password !== undefined) && (user !== username || pass !== password)) {
        return 'entries that give credentials must give the same ones (they are the cluster\'s)';
      }
      username = user;
      password = pass;
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = url.port === '' ? 6379 : Number(url.port);
    if (!nodes.some((n) => n.host === host && n.port === port)) nodes.push({ host, port });
  }
  return {
    nodes,
    ...(username !== undefined && { username }),
    ...(password !== undefined && { password }),
    tls: scheme === 'rediss:',
  };
}

/** An entry as it may appear in a message: its password replaced. */
function redactEntry(entry: string): string {
  return entry.replace(/^([a-z]+:\/\/[^:@/]*:)[^@/]*@/i, '$1***@');
}

function withDefaultUser(raw: string): string {
  const url = new URL(raw);
  if (!url.username) {
    try {
      url.username = encodeURIComponent(userInfo().username);
    } catch {
      return raw;
    }
  }
  return url.toString();
}

/** `process.env` after loading `.env` from the working directory, when one exists (values already set win). */
function readEnv(): NodeJS.ProcessEnv {
  if (existsSync('.env')) {
    process.loadEnvFile('.env');
  }
  return process.env;
}
