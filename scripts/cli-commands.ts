/**
 * The operator CLI's commands (run by scripts/cli.ts): the admin API's operations against the database directly, printing JSON.
 *
 *   npm run cli -- accounts:create --currency CZK [--name Acme] [--country CZ] [--credit-czk 100] [--credit-eur 0]
 *   npm run cli -- accounts:get <account_id>
 *   npm run cli -- accounts:set <account_id> --json '{"verification_attempts": 3}'
 *   npm run cli -- credit:add <account_id> [--czk 10] [--eur 1]
 *   npm run cli -- key-credit:add <key_id> --amount 10
 *   npm run cli -- prices:set --json '[{"channel":"sms","prefix":"420","price_czk":0.9,"price_eur":0.036}]'
 *   npm run cli -- prices:list
 *   npm run cli -- keys:list [--account <account_id>]
 *   npm run cli -- numbers:assign --json '{"account_id":1,"value":"420777000111","channels":["sms"]}'
 *
 * Every command also takes its whole input as `--json '<object>'`. Inputs are validated with the
 * same schemas as the admin API; errors name the field and exit with status 2.
 */
import type { Db } from '../shared/db/pool.js';
import { validate } from '../shared/validation.js';
import { AppError } from '../shared/errors.js';
import { createAccount, getAccount, updateAccount, addAccountCredit, addKeyCredit, listKeys } from '../shared/domain/accounts.js';
import { listPrices, upsertPrices } from '../shared/domain/prices.js';
import { assignNumber } from '../shared/domain/numbers.js';
import {
  newAccountSchema, accountSettingsSchema, creditSchema, keyCreditSchema, pricesSchema, numberAssignmentSchema,
} from '../shared/domain/admin-schemas.js';

type Flags = Record<string, string>;

export function parseArgs(argv: string[]): { command: string; positional: string[]; flags: Flags } {
  const [command = 'help', ...rest] = argv;
  const positional: string[] = [];
  const flags: Flags = {};
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      if (eq > 0) {
        flags[arg.slice(2, eq)] = arg.slice(eq + 1);
      } else {
        flags[arg.slice(2)] = rest[i + 1] ?? '';
        i++;
      }
    } else {
      positional.push(arg);
    }
  }
  return { command, positional, flags };
}

function jsonInput(flags: Flags): unknown {
  if (flags.json === undefined) {
    return undefined;
  }
  try {
    return JSON.parse(flags.json);
  } catch (err) {
    throw new AppError(400, 'BAD_JSON', `--json: ${(err as Error).message}`);
  }
}

/** `--credit-czk 10` → `{credit_czk: 10}`; numbers where they parse. */
function flagObject(flags: Flags, names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const value = flags[name.replace(/_/g, '-')] ?? flags[name];
    if (value !== undefined) {
      out[name] = value !== '' && !Number.isNaN(Number(value)) && /^-?[\d.]+$/.test(value) ? Number(value) : value;
    }
  }
  return out;
}

function idArg(positional: string[], flags: Flags, name: string): number {
  const raw = positional[0] ?? flags[name];
  if (!raw || !/^\d+$/.test(raw)) {
    throw new AppError(400, 'BAD_ARGUMENT', `${name}: give a numeric id as the first argument`);
  }
  return Number(raw);
}

export async function runCommand(db: Db, argv: string[]): Promise<unknown> {
  const { command, positional, flags } = parseArgs(argv);
  const json = jsonInput(flags);
  switch (command) {
    case 'accounts:create':
      return createAccount(db, validate(newAccountSchema, json ?? flagObject(flags, ['name', 'country', 'currency', 'credit_czk', 'credit_eur', 'default_sender']), { convert: true }));
    case 'accounts:get':
      return getAccount(db, idArg(positional, flags, 'account'));
    case 'accounts:set':
      return updateAccount(db, idArg(positional, flags, 'account'), validate(accountSettingsSchema, json ?? flagObject(flags, [
        'name', 'country', 'default_sender', 'verification_secret', 'verification_attempts', 'verification_expiry_s', 'verification_template',
        'verify_account_per_min', 'verify_phone_per_hour', 'verify_phone_cooldown_s', 'reply_window_days']), { convert: true }));
    case 'credit:add': {
      const input = validate(creditSchema, json ?? flagObject(flags, ['czk', 'eur']), { convert: true });
      return addAccountCredit(db, idArg(positional, flags, 'account'), input.czk ?? 0, input.eur ?? 0);
    }
    case 'key-credit:add':
      return addKeyCredit(db, idArg(positional, flags, 'key'), validate(keyCreditSchema, json ?? flagObject(flags, ['amount']), { convert: true }).amount);
    case 'prices:set':
      return { updated: await upsertPrices(db, validate(pricesSchema, json, { convert: true })) };
    case 'prices:list':
      return { prices: await listPrices(db) };
    case 'keys:list': {
      const account = flags.account ?? positional[0];
      return { keys: await listKeys(db, account === undefined ? undefined : idArg([account], flags, 'account')) };
    }
    case 'numbers:assign':
      return assignNumber(db, validate(numberAssignmentSchema, json, { convert: true }));
    default:
      throw new AppError(400, 'UNKNOWN_COMMAND', `unknown command "${command}"; commands: accounts:create, accounts:get, accounts:set, credit:add, key-credit:add, prices:set, prices:list, keys:list, numbers:assign`);
  }
}

