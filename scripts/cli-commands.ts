/**
 * The operator CLI's commands: the admin API's operations against the database directly, printing
 * JSON on stdout (nothing else goes there, so the output pipes into `jq`). Run as
 * `switchboard <command>` (compiled: `node dist/bin/switchboard.js <command>`) or, in a checkout,
 * `npm run cli -- <command>`.
 *
 * Every command answers `--help` without touching the database, refuses unknown flags by name,
 * says on stderr which database it acts on, and never migrates: a database that lacks migrations
 * is refused with the command that applies them (`switchboard migrate`). Every command also takes
 * its whole input as `--json '<object>'`; inputs are validated with the admin API's schemas.
 * Exit status: 0 done, 2 bad usage or input (the message names the flag or field), 1 failure.
 */
import { parseArgs } from 'node:util';
import type { Db } from '../shared/db/pool.js';
import { createPool } from '../shared/db/pool.js';
import { pendingMigrations, describe as describeMigrations } from '../shared/db/schema.js';
import { loadConfig, type Config } from '../shared/config.js';
import { validate } from '../shared/validation.js';
import { AppError } from '../shared/errors.js';
import { SecretBox } from '../shared/secrets/sealed.js';
import { checkCredentialsKey } from '../shared/secrets/key-check.js';
import { redactUrl } from '../shared/net/redact-url.js';
import { createAccount, getAccount, updateAccount, addAccountCredit, addKeyCredit, listKeys } from '../shared/domain/accounts.js';
import { listPrices, upsertPrices } from '../shared/domain/prices.js';
import { assignNumber } from '../shared/domain/numbers.js';
import {
  newAccountSchema, accountSettingsSchema, creditSchema, keyCreditSchema, pricesSchema, numberAssignmentSchema,
  deadBatchesQuerySchema, deadReplaySchema,
} from '../shared/domain/admin-schemas.js';
import { listDeadBatches, reviveDeadBatches } from '../shared/webhooks/deliver.js';

type Values = Record<string, string | undefined>;

export interface CliCommand {
  name: string;
  summary: string;
  /** Arguments after the command's name, for its usage line. */
  usage: string;
  /** Its flags (every one takes a value), by name, with what they mean. */
  flags: Record<string, string>;
  /** Positional arguments it takes at most. */
  positionals: number;
  run(db: Db, values: Values, positional: string[], secrets: CliSecrets): Promise<unknown>;
}

/** The box of CREDENTIALS_KEY, for commands that store a secret sealed. */
interface CliSecrets {
  /** Checked against the key the stored secrets were sealed with first (a BAD_CONFIGURATION otherwise). */
  checked(): Promise<SecretBox>;
  /** Unchecked: for a call that takes the box but stores no secret this time. */
  unchecked: SecretBox;
}

const JSON_FLAG = { json: 'the whole input as one JSON document (instead of the flags)' };

function jsonInput(values: Values): unknown {
  if (values.json === undefined) return undefined;
  try {
    return JSON.parse(values.json);
  } catch (err) {
    throw new AppError(400, 'BAD_JSON', `--json: ${(err as Error).message}`);
  }
}

/** `--credit-czk 10` → `{credit_czk: 10}`; numbers where they parse. */
function flagObject(values: Values, names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const value = values[name.replace(/_/g, '-')];
    if (value !== undefined) {
      out[name] = value !== '' && /^-?[\d.]+$/.test(value) && !Number.isNaN(Number(value)) ? Number(value) : value;
    }
  }
  return out;
}

function idArg(raw: string | undefined, name: string): number {
  // Within what a JavaScript number holds exactly (a larger one was rounded to another id) and a bigint column.
  if (!raw || !/^\d+$/.test(raw) || Number(raw) < 1 || !Number.isSafeInteger(Number(raw))) {
    throw new AppError(400, 'BAD_ARGUMENT', `${name}: give a numeric id (1 to ${Number.MAX_SAFE_INTEGER}) as the first argument`);
  }
  return Number(raw);
}

const ACCOUNT_FIELDS = ['name', 'country', 'currency', 'credit_czk', 'credit_eur', 'default_sender'];
const SETTINGS_FIELDS = [
  'name', 'country', 'default_sender', 'verification_secret', 'verification_attempts', 'verification_expiry_s', 'verification_template',
  'verify_account_per_min', 'verify_phone_per_hour', 'verify_phone_cooldown_s', 'reply_window_days',
];
const flagsOf = (fields: string[], meaning: string): Record<string, string> =>
  Object.fromEntries(fields.map((f) => [f.replace(/_/g, '-'), `${meaning} ${f}`]));

export const CLI_COMMANDS: readonly CliCommand[] = [
  {
    name: 'accounts:create',
    summary: 'create an account; prints {account_id, api_key} (the key is shown only once)',
    usage: '--currency CZK|EUR [--name NAME] [--country CZ] [--credit-czk N] [--credit-eur N] [--default-sender S]',
    flags: { ...flagsOf(ACCOUNT_FIELDS, 'the account\'s'), ...JSON_FLAG },
    positionals: 0,
    run: (db, values) => createAccount(db, validate(newAccountSchema, jsonInput(values) ?? flagObject(values, ACCOUNT_FIELDS), { convert: true })),
  },
  {
    name: 'accounts:get',
    summary: 'an account with its balances and settings',
    usage: '<account_id>',
    flags: {},
    positionals: 1,
    run: (db, _values, positional) => getAccount(db, idArg(positional[0], 'account_id')),
  },
  {
    name: 'accounts:set',
    summary: 'change an account\'s settings (verification, replies, sender, name, country)',
    usage: '<account_id> --json \'{"verification_attempts": 3}\' (or the flags below)',
    flags: { ...flagsOf(SETTINGS_FIELDS, 'the account\'s'), ...JSON_FLAG },
    positionals: 1,
    run: async (db, values, positional, secrets) => {
      const settings = validate(accountSettingsSchema, jsonInput(values) ?? flagObject(values, SETTINGS_FIELDS), { convert: true });
      // The key is checked (and needed) only when a secret is stored.
      const box = settings.verification_secret !== undefined ? await secrets.checked() : secrets.unchecked;
      return updateAccount(db, box, idArg(positional[0], 'account_id'), settings);
    },
  },
  {
    name: 'credit:add',
    summary: 'add credit to an account (a negative amount takes it back); prints the balances',
    usage: '<account_id> [--czk N] [--eur N]',
    flags: { czk: 'CZK to add', eur: 'EUR to add', ...JSON_FLAG },
    positionals: 1,
    run: async (db, values, positional) => {
      const input = validate(creditSchema, jsonInput(values) ?? flagObject(values, ['czk', 'eur']), { convert: true });
      return addAccountCredit(db, idArg(positional[0], 'account_id'), input.czk ?? 0, input.eur ?? 0);
    },
  },
  {
    name: 'key-credit:add',
    summary: 'top up a sub-key that holds its own credit',
    usage: '<key_id> --amount N',
    flags: { amount: 'credit to add, in the key\'s currency', ...JSON_FLAG },
    positionals: 1,
    run: (db, values, positional) =>
      addKeyCredit(db, idArg(positional[0], 'key_id'), validate(keyCreditSchema, jsonInput(values) ?? flagObject(values, ['amount']), { convert: true }).amount),
  },
  {
    name: 'prices:set',
    summary: 'upsert price rows (longest prefix wins)',
    usage: '--json \'[{"channel":"sms","prefix":"420","price_czk":0.9,"price_eur":0.036}]\'',
    flags: { ...JSON_FLAG },
    positionals: 0,
    run: async (db, values) => ({ updated: await upsertPrices(db, validate(pricesSchema, jsonInput(values), { convert: true })) }),
  },
  {
    name: 'prices:list',
    summary: 'every price row',
    usage: '',
    flags: {},
    positionals: 0,
    run: async (db) => ({ prices: await listPrices(db) }),
  },
  {
    name: 'keys:list',
    summary: 'API keys (prefixes and settings, never the keys), of one account or all',
    usage: '[--account <account_id>]',
    flags: { account: 'only this account\'s keys' },
    positionals: 1,
    run: async (db, values, positional) => {
      const account = values.account ?? positional[0];
      return { keys: await listKeys(db, account === undefined ? undefined : idArg(account, 'account')) };
    },
  },
  {
    name: 'numbers:assign',
    summary: 'assign a number or sender name that receives inbound traffic to an account',
    usage: '--json \'{"account_id":1,"value":"420777000111","channels":["sms"]}\'',
    flags: { ...JSON_FLAG },
    positionals: 0,
    run: async (db, values) => assignNumber(db, validate(numberAssignmentSchema, jsonInput(values), { convert: true })),
  },
  {
    name: 'webhooks:dead',
    summary: 'dead-lettered webhook batches, newest first (at most 1000; narrow with --key-id or --since)',
    usage: '[--key-id N] [--since ISO-8601]',
    flags: { 'key-id': 'only this API key\'s batches', since: 'only batches dead-lettered since then', ...JSON_FLAG },
    positionals: 0,
    run: async (db, values) => {
      const q = validate(deadBatchesQuerySchema, jsonInput(values) ?? flagObject(values, ['key_id', 'since']), { convert: true });
      return { batches: await listDeadBatches(db, { ...(q.key_id !== undefined && { keyId: q.key_id }), ...(q.since && { since: q.since }) }) };
    },
  },
  {
    name: 'webhooks:replay',
    summary: 'deliver dead-lettered batches again: one (--id), or a key\'s since an instant; the recovery sweep sends them within its grace (about a minute)',
    usage: '--id N | --key-id N --since ISO-8601',
    flags: { id: 'one batch', 'key-id': 'the API key whose batches', since: 'dead-lettered since then', ...JSON_FLAG },
    positionals: 0,
    run: async (db, values) => {
      const input = validate(deadReplaySchema, jsonInput(values) ?? flagObject(values, ['id', 'key_id', 'since']), { convert: true });
      // Pending again in Postgres; without a queue here, the sweep enqueues pending batches it finds (workers/recovery.ts).
      const ids = await reviveDeadBatches(db, {
        ...(input.id !== undefined && { id: input.id }),
        ...(input.key_id !== undefined && { keyId: input.key_id }),
        ...(input.since && { since: input.since }),
      });
      return { replayed: ids.length, ids };
    },
  },
];

export function commandUsage(cmd: CliCommand, program: string): string {
  const lines = [`usage: ${program} ${cmd.name}${cmd.usage ? ` ${cmd.usage}` : ''}`, '', `  ${cmd.summary}`, ''];
  const flags = Object.entries(cmd.flags);
  if (flags.length > 0) {
    const width = Math.max(...flags.map(([f]) => f.length)) + 2;
    lines.push('flags:');
    for (const [flag, meaning] of flags) lines.push(`  --${flag.padEnd(width)} ${meaning}`);
    lines.push('');
  }
  lines.push('Prints JSON on stdout; says which database it acts on on stderr. Exit 0 done, 2 bad usage or input, 1 failure.');
  return `${lines.join('\n')}\n`;
}

export function commandsOverview(): string {
  const width = Math.max(...CLI_COMMANDS.map((c) => c.name.length)) + 2;
  return CLI_COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`).join('\n');
}

export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

const STD_IO: CliIo = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

function fail(io: CliIo, code: string, message: string): void {
  io.err(`${JSON.stringify({ error: code, message })}\n`);
}

/**
 * Runs one operator command (`argv`: the command's name, then its arguments) and returns the exit
 * status. `program` names the entry in usage texts.
 */
export async function runCli(argv: string[], program = 'switchboard', io: CliIo = STD_IO, env?: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.out(`usage: ${program} <command> [arguments]\n\ncommands:\n${commandsOverview()}\n\n${program} <command> --help tells more.\n`);
    return 0;
  }
  const cmd = CLI_COMMANDS.find((c) => c.name === name);
  if (!cmd) {
    fail(io, 'UNKNOWN_COMMAND', `unknown command "${name}"; commands: ${CLI_COMMANDS.map((c) => c.name).join(', ')}`);
    return 2;
  }
  let values: Values & { help?: boolean | string };
  let positional: string[];
  try {
    const parsed = parseArgs({
      args: rest,
      options: { ...Object.fromEntries(Object.keys(cmd.flags).map((f) => [f, { type: 'string' as const }])), help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    values = parsed.values as Values & { help?: boolean };
    positional = parsed.positionals;
  } catch (err) {
    fail(io, 'BAD_USAGE', `${cmd.name}: ${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')} (see ${program} ${cmd.name} --help)`);
    return 2;
  }
  if (values.help === true) {
    io.out(commandUsage(cmd, program));
    return 0;
  }
  delete values.help;
  if (positional.length > cmd.positionals) {
    fail(io, 'BAD_USAGE', `${cmd.name}: unexpected argument "${positional[cmd.positionals]}" (see ${program} ${cmd.name} --help)`);
    return 2;
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    fail(io, 'BAD_CONFIGURATION', (err as Error).message);
    return 2;
  }
  io.err(`${program} ${cmd.name}: database ${redactUrl(config.databaseUrl)}\n`);
  const db = createPool(config.databaseUrl, 2);
  try {
    let pending: string[];
    try {
      pending = await pendingMigrations(db);
    } catch (err) {
      fail(io, 'DATABASE_UNREACHABLE', `Cannot reach PostgreSQL at ${redactUrl(config.databaseUrl)}: ${(err as Error).message}`);
      return 1;
    }
    if (pending.length > 0) {
      fail(io, 'SCHEMA_NOT_READY', `the database lacks migrations ${describeMigrations(pending)}; apply them with \`switchboard migrate\` (in a checkout: \`npm run migrate\`) first`);
      return 1;
    }
    const box = new SecretBox(config.credentialsKey);
    const secrets: CliSecrets = {
      unchecked: box,
      checked: async () => {
        const problem = await checkCredentialsKey(db, box);
        if (problem) throw new AppError(400, 'BAD_CONFIGURATION', problem);
        return box;
      },
    };
    const result = await cmd.run(db, values as Values, positional, secrets);
    io.out(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof AppError) {
      fail(io, err.code, err.message);
      return 2;
    }
    fail(io, 'INTERNAL_ERROR', (err as Error).message);
    return 1;
  } finally {
    await db.end();
  }
}
