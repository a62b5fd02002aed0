/** Input schemas of the operator operations, shared by the admin HTTP API and the CLI (D11). */
import Joi from 'joi';
import type { NewAccount, AccountSettings } from './accounts.js';
import type { PriceRow } from './prices.js';
import { isValidCountry } from '../phone/normalize.js';
import { CHANNELS, FAMILIES } from '../channels/index.js';
import { SMS_SENDER, SMS_SENDER_RULE } from '../channels/sms.js';
import { MAX_KEYWORD_LENGTH, normalizeKeyword } from '../suppression/keywords.js';
import { isoInstant } from '../validation.js';

const country = Joi.string().length(2).uppercase().custom((v: string, helpers) =>
  isValidCountry(v.toUpperCase()) ? v.toUpperCase() : helpers.error('any.invalid'));
// Checked as given, whatever the caller's conversion: a fifth decimal is refused, not rounded (the CLI's 0.00001 became 0).
const money = Joi.number().precision(4).min(-1e12).max(1e12).prefs({ convert: false });
// What a step's sms.sender may be (the default stands in for it): a name of up to 11 characters
// with a letter, or a number of up to 15 digits.
const sender = Joi.string().pattern(SMS_SENDER).messages({ 'string.pattern.base': SMS_SENDER_RULE });

export const newAccountSchema = Joi.object<NewAccount>({
  name: Joi.string().max(200).allow(''),
  country,
  currency: Joi.string().valid('CZK', 'EUR').required(),
  credit_czk: money.min(0),
  credit_eur: money.min(0),
  default_sender: sender,
});

/** An account's own opt-out or opt-in keywords (issue 27); null restores the defaults. */
const keywordList = Joi.array().items(Joi.string().min(1).max(MAX_KEYWORD_LENGTH).custom((v: string, helpers) =>
  normalizeKeyword(v).length > 0 ? v : helpers.error('any.invalid'))).max(50).unique().allow(null);

export const accountSettingsSchema = Joi.object<AccountSettings>({
  name: Joi.string().max(200).allow(''),
  country,
  default_sender: sender.allow(null),
  verification_secret: Joi.string().min(16).max(256).allow(null),
  verification_attempts: Joi.number().integer().min(1).max(20),
  verification_expiry_s: Joi.number().integer().min(1).max(86400),
  verification_template: Joi.string().min(1).max(500).pattern(/\{code\}/, 'containing {code}'),
  verify_account_per_min: Joi.number().integer().min(1).max(1e6),
  verify_phone_per_hour: Joi.number().integer().min(1).max(1e4),
  verify_phone_cooldown_s: Joi.number().integer().min(0).max(86400),
  reply_window_days: Joi.number().integer().min(0).max(365),
  opt_out_promotional: Joi.boolean(),
  opt_out_keywords: keywordList,
  opt_in_keywords: keywordList,
}).min(1);

export const creditSchema = Joi.object<{ czk?: number; eur?: number }>({ czk: money, eur: money }).or('czk', 'eur');
export const keyCreditSchema = Joi.object<{ amount: number }>({ amount: money.required() });

export const pricesSchema = Joi.array<PriceRow[]>().items(Joi.object({
  channel: Joi.string().valid(...CHANNELS).required(),
  prefix: Joi.string().pattern(/^[0-9]{0,15}$/).allow('').required(),
  operator: Joi.number().integer().min(0).max(999).default(0),
  // As stored (numeric(18,4)): a fifth decimal would be rounded away, 0.00004 to a free price.
  // (The rows are validated with conversion on, for operator's default: not these.)
  price_czk: Joi.number().precision(4).min(0).max(1e6).required().prefs({ convert: false }),
  price_eur: Joi.number().precision(4).min(0).max(1e6).required().prefs({ convert: false }),
  // One statement upserts every row: two rows of one (channel, prefix, operator) are a mistake to name.
})).min(1).max(100000).unique((a: PriceRow, b: PriceRow) => a.channel === b.channel && a.prefix === b.prefix && (a.operator ?? 0) === (b.operator ?? 0))
  .messages({ 'array.unique': '{{#label}} has the channel, prefix and operator of row {{#dupePos}}' });

export const numberAssignmentSchema = Joi.object<{ account_id: number; value: string; channels: string[] }>({
  account_id: Joi.number().integer().min(1).required(),
  value: Joi.string().min(1).max(32).required(),
  channels: Joi.array().items(Joi.string().valid(...FAMILIES)).min(1).unique().default([...FAMILIES]),
});

/** Key settings an operator may change (the same fields as `POST /v1/apikey/update`, plus disabling). */
export const keySettingsSchema = Joi.object<{ note?: string; default_callback_url?: string | null; webhook_secret?: string | null; disabled?: boolean }>({
  note: Joi.string().max(200).allow(''),
  default_callback_url: Joi.string().max(2048).uri({ scheme: ['http', 'https'] }).allow(null),
  webhook_secret: Joi.string().max(200).allow(null),
  disabled: Joi.boolean(),
}).min(1);

/** `GET /admin/api/webhooks/dead` (and the CLI's `webhooks:dead`): one key's, or since an instant. */
export const deadBatchesQuerySchema = Joi.object<{ key_id?: number; since?: Date }>({
  key_id: Joi.number().integer().min(1),
  since: isoInstant,
});

/** `POST /admin/api/webhooks/replay` (and the CLI's `webhooks:replay`): one batch, or a key's since an instant. */
export const deadReplaySchema = Joi.alternatives<{ id?: number; key_id?: number; since?: Date }>().try(
  Joi.object({ id: Joi.number().integer().min(1).required() }),
  Joi.object({ key_id: Joi.number().integer().min(1).required(), since: isoInstant.required() }),
).messages({ 'alternatives.match': 'give id, or key_id and since' });
