/**
 * The OpenAPI 3.1 documents of every API family, served at `/openapi/<family>.json` and rendered at
 * `/docs`. Request schemas are the ones the handlers validate with (the message object, the admin
 * and webhook-delivery schemas); where a handler checks its input by hand (REST key settings,
 * verification, the simple endpoint's flat parameters) the schema here states the same rules, and
 * the tests hold real answers against every response schema, so the documents cannot drift.
 */
import Joi from 'joi';
import { document, type DocumentSpec, type JsonSchema, type Operation } from './build.js';
import { messageSchema, MAX_OBJECTS } from '../../shared/sending/message-schema.js';
import { CHANNELS, FAMILIES } from '../../shared/channels/index.js';
import {
  newAccountSchema, accountSettingsSchema, creditSchema, keyCreditSchema, pricesSchema, numberAssignmentSchema, keySettingsSchema,
} from '../../shared/domain/admin-schemas.js';
import { deliveriesQuerySchema, replayBodySchema, DELIVERY_STATUSES } from '../../shared/webhooks/deliveries.js';
import { MESSAGE_QUERY_PARAMS } from '../../shared/rest/messages.js';
import { SUPPRESSION_QUERY_PARAMS, MAX_SUPPRESSION_LIMIT, DEFAULT_SUPPRESSION_LIMIT } from '../../shared/rest/suppressions.js';
import { KEY_SCOPES } from '../../shared/domain/keys.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../../shared/sending/idempotency.js';
import { END_REASONS } from '../../shared/lookup/reasons.js';

export const FAMILY_NAMES = ['sending', 'legacy', 'simple', 'xml', 'rest', 'verification', 'whatsapp', 'admin', 'webhooks'] as const;
export type FamilyName = (typeof FAMILY_NAMES)[number];

const API_KEY = { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'The account\'s API key (`sb_…`)' } };
const KEY: Array<Record<string, string[]>> = [{ apiKey: [] }];
const ADMIN = { adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' } };

const str = Joi.string();
const int = Joi.number().integer();
const num = Joi.number();
const bool = Joi.boolean();
const iso = Joi.string().isoDate();
const nullable = (s: Joi.Schema) => s.allow(null);
const obj = (keys: Record<string, Joi.Schema>) => Joi.object(keys);
const required = (keys: Record<string, Joi.Schema>) => Joi.object(Object.fromEntries(Object.entries(keys).map(([k, s]) => [k, s.required()])));

// --- Sending (v2, legacy v1, simple) ---------------------------------------------------------

const sendError = required({ Message: str.description('what is wrong with the whole request (D2: a bad key answers 400 too)') });
const accepted = Joi.array().items(required({ key: str, message_id: str }));
const rejectedEntry = required({ key: str, message: str.description('`<field path>: <what is wrong>`') });
const batchAnswer = required({ request_id: str, accepted, rejected: Joi.array().items(rejectedEntry) });
const singleAnswer = required({ request_id: str, accepted, rejected: Joi.array().max(0) });
const legacyAnswer = required({
  requestId: str, accepted: Joi.array().items(required({ key: str, messageId: str })), rejected: Joi.array().items(rejectedEntry),
});
const messages = Joi.array().items(messageSchema).min(1).max(MAX_OBJECTS);
const sendErrors = {
  400: { description: 'The request as a whole is refused (bad key, body, JSON)', schema: sendError },
  429: { description: 'Too many large calls wait: nothing was accepted, retry (Retry-After)', schema: sendError },
};
/** `Idempotency-Key` (issue 27, docs/sending-api.md): a repeated call within 24 hours is answered as the first was. */
const idempotent = {
  headers: {
    'Idempotency-Key': {
      description: 'Optional. A repeated call with the same key and the same body within 24 hours accepts nothing new and gets the first answer again (marked `Idempotent-Replayed: true`)',
      schema: { type: 'string', minLength: 1, maxLength: MAX_IDEMPOTENCY_KEY_LENGTH, pattern: '^[\\x20-\\x7e]+$' },
    },
  },
};
const idempotencyConflict = { 409: { description: 'The Idempotency-Key was used for another request (body or endpoint) in the last 24 hours', schema: sendError } };
const carrierRef = required({ ref: str, part: int, state: str });
const attemptView = required({
  step: int, gateway: str.valid(...CHANNELS), carrier: str, sender: str, result: str, result_info: str, parts: int, price_czk: num, price_eur: num,
  charged: num, currency: nullable(str.valid('CZK', 'EUR')), refunded: bool, created_at: iso, handed_at: nullable(iso), answered_at: nullable(iso),
  receipt_at: nullable(iso), carrier_refs: Joi.array().items(carrierRef), end_reason: nullable(str.valid(...END_REASONS)), fell_back_to: nullable(str.valid(...CHANNELS)),
});
const webhookView = Joi.object({
  status: str.valid('none', 'queued', 'pending', 'delivered', 'dead', 'unknown').required(), url: str, batch_id: int, attempts: int, last_status: nullable(int),
  delivered_at: nullable(iso), dead_at: nullable(iso),
});
const eventView = required({
  event_id: int, type: str, gateway: nullable(str), result: nullable(str), result_info: nullable(str), timestamp: nullable(int), created_at: iso, webhook: webhookView,
});
const recipientView = required({
  message_id: str, request_id: str, phone_number: str, tag: str, result: str, result_info: str, gateway: nullable(str.valid(...CHANNELS)), price_czk: num,
  price_eur: num, parts: int, created_at: iso, attempts: Joi.array().items(attemptView), events: Joi.array().items(eventView),
});
const lookupAnswer = required({ message_id: str, request_id: str, created_at: iso, recipients: Joi.array().items(recipientView) });

const sending: DocumentSpec = {
  title: 'switchboard sending API v2',
  description: 'Send text messages over SMS, Viber and WhatsApp with an ordered fallback `flow` (docs/sending-api.md). Events come back as webhooks (the webhooks document).',
  securitySchemes: API_KEY,
  security: KEY,
  paths: {
    '/v2/message': {
      post: {
        summary: 'Send one message object', body: { schema: messageSchema }, ...idempotent,
        responses: { 200: { description: 'Accepted (its recipients\' ids); invalid numbers are reported later as events', schema: singleAnswer }, ...sendErrors, ...idempotencyConflict },
      },
    },
    '/v2/messages': {
      post: {
        summary: `Send 1 to ${MAX_OBJECTS} message objects`, body: { schema: messages }, ...idempotent,
        responses: { 200: { description: 'Accepted objects and rejected ones (by index `key`)', schema: batchAnswer }, ...sendErrors, ...idempotencyConflict },
      },
    },
    '/v2/messages/{id}': {
      get: {
        summary: 'A message (or one recipient) with its status timeline: attempts, carrier refs, events and where their webhooks went',
        path: { id: { description: 'A message id (20 hexadecimal characters) or a recipient id' } },
        responses: {
          200: { description: 'The message; with EVENT_RETENTION_DAYS set, events older than the retention are no longer listed (the attempts are)', schema: lookupAnswer },
          400: sendErrors[400], 404: { description: 'Unknown, not visible to this key, or deleted: with MESSAGE_RETENTION_DAYS set, a message older than the retention whose work is over is deleted', schema: sendError },
        },
      },
    },
  },
};

const legacy: DocumentSpec = {
  title: 'switchboard legacy JSON API v1',
  description: 'The v2 message objects with the older camelCase answer.',
  securitySchemes: API_KEY,
  security: KEY,
  paths: {
    '/v1/messages': {
      post: {
        summary: `Send 1 to ${MAX_OBJECTS} message objects`, body: { schema: messages }, ...idempotent,
        responses: { 200: { description: 'Accepted and rejected objects', schema: legacyAnswer }, ...sendErrors, ...idempotencyConflict },
      },
    },
  },
};

/** The simple endpoint's flat parameters (D9), mapped onto the message object (api/routes/send.ts `simpleToMessage`). */
const simpleParams = obj({
  apikey: str.description('the API key (GET only; or the x-api-key header)'),
  phone_number: str.description('recipient (alias `number`)'),
  number: str.description('alias of phone_number'),
  message: str.description('text (alias `body`)'),
  body: str.description('alias of message'),
  sender: str.description('SMS sender'),
  gateway: str.valid('high', 'direct', 'custom').description('SMS gateway (default high)'),
  datetime: str.description('send at (UTC; alias `time`)'),
  time: str.description('alias of datetime'),
  customID: str.description('returned in events as payload.customID'),
});
const simpleAnswer = required({ request_id: str, message_id: str, accepted: Joi.valid(true) });
const simpleRefused = Joi.alternatives(required({ request_id: str, accepted: Joi.valid(false), message: str }), sendError);

const simple: DocumentSpec = {
  title: 'switchboard simple sending endpoint',
  description: 'One SMS to one number with flat parameters (D9).',
  securitySchemes: { ...API_KEY, apiKeyQuery: { type: 'apiKey', in: 'query', name: 'apikey' } },
  paths: {
    '/v2/simple/message': {
      get: {
        summary: 'Send one SMS (query parameters)', security: [{ apiKey: [] }, { apiKeyQuery: [] }], query: simpleParams,
        responses: { 200: { description: 'Accepted', schema: simpleAnswer }, 400: { description: 'Refused: a bad key (`Message`) or a bad parameter', schema: simpleRefused } },
      },
      post: {
        summary: 'Send one SMS (form fields)', security: KEY, body: { schema: simpleParams.fork(['apikey'], (s) => s.forbidden()), type: 'application/x-www-form-urlencoded' },
        responses: {
          200: { description: 'Accepted', schema: simpleAnswer }, 400: { description: 'Refused', schema: simpleRefused },
          415: { description: 'Not a form', schema: obj({ message: str }) },
        },
      },
    },
  },
};

const xmlText = { type: 'string', description: 'A `Result` document (spec "XML API")' } satisfies JsonSchema;
const xml: DocumentSpec = {
  title: 'switchboard XML API',
  description: 'The XML document travels as a form field; the key as another (D9). Answers are XML `Result` documents.',
  paths: {
    '/xml': {
      post: {
        summary: 'Send the Requests of an XML document',
        body: {
          type: 'application/x-www-form-urlencoded',
          schema: required({ XMLDATA: str.description('RequestDocument > RequestList > Request (Type, Sender) > Message, NumbersList > Number'), apikey: str.description('the API key') }),
        },
        responses: {
          200: { description: 'Response Type="OK" with the RequestIDs and numbers', schema: xmlText, type: 'application/xml' },
          400: { description: 'Response Type="ERROR" with its ID (101 XML, 102 size, 109 …)', schema: xmlText, type: 'application/xml' },
          401: { description: 'Error 103: bad key', schema: xmlText, type: 'application/xml' },
          402: { description: 'Error 105: no credit', schema: xmlText, type: 'application/xml' },
        },
      },
    },
  },
};

// --- REST -------------------------------------------------------------------------------------

const restError = required({ success: Joi.valid(false), message: str });
const restErrors = {
  400: { description: 'Bad input; the message names the field', schema: restError },
  401: { description: 'Missing, unknown or disabled key', schema: restError },
  403: { description: 'A key whose scope is `api` (this API needs `full` or `rest-api`)', schema: restError },
  413: { description: 'A body over 256 KB', schema: restError },
  503: { description: 'Postgres cannot be reached; nothing was changed (Retry-After)', schema: restError },
};
const subKeyRefused = { 403: { description: 'A sub-key (the primary key only), or a key whose scope is `api`', schema: restError } };
const ok = (keys: Record<string, Joi.Schema>) => required({ success: Joi.valid(true), ...keys });
const scope = str.valid(...KEY_SCOPES).description('full: every API; api: sending, lookup and verification; rest-api: the REST API only');
const subKey = required({
  id: int, key_prefix: str, note: str, shared: bool, currency: str.valid('CZK', 'EUR'), default_callback_url: nullable(str), disabled: bool, scope, created_at: iso,
});
const suppression = required({ phone_number: str, family: str.valid(...FAMILIES), source: str.valid('keyword', 'api'), created_at: iso });
const suppressionsQuery = obj({
  family: str.valid(...FAMILIES),
  phone_number: str.max(32),
  cursor: str.description('next_cursor of the previous page'),
  limit: int.min(1).max(MAX_SUPPRESSION_LIMIT).default(DEFAULT_SUPPRESSION_LIMIT),
});
if (Object.keys(suppressionsQuery.describe().keys ?? {}).join() !== SUPPRESSION_QUERY_PARAMS.join()) throw new Error('openapi: GET /v1/suppressions parameters differ from the handler\'s');
const delivery = required({
  id: int, webhook_id: str, url: str, status: str.valid(...DELIVERY_STATUSES), events: int, attempts: int, last_status: nullable(int), last_error: nullable(str),
  created_at: iso, updated_at: iso, delivered_at: nullable(iso), dead_at: nullable(iso), next_attempt_at: nullable(iso).description('when a pending batch is tried again'),
});
const messagesQuery = obj({
  date: str.pattern(/^\d{4}-\d{2}-\d{2}$/).description('UTC day; required unless message_id is given'),
  message_id: str.max(64).description("a message id (its recipients) or a recipient's id"),
  tag: str.max(100),
  phone_number: str.max(32),
  cursor: str.description('next_cursor of the previous page'),
  limit: int.min(1).max(1000).default(100),
});
if (Object.keys(messagesQuery.describe().keys ?? {}).join() !== MESSAGE_QUERY_PARAMS.join()) throw new Error('openapi: GET /v1/messages parameters differ from the handler\'s');
const keySettings = obj({ default_callback_url: nullable(str.max(2048)), note: nullable(str.max(255)), webhook_secret: nullable(str.max(512)).description('whsec_ + base64 (Standard Webhooks)') });

const rest: DocumentSpec = {
  title: 'switchboard REST API',
  description: 'Credit, sent messages, key settings, sub-keys and webhook deliveries (D6). Failures answer `{success: false, message}`.',
  securitySchemes: API_KEY,
  security: KEY,
  paths: {
    '/v1/credit': { get: { summary: 'Balances', responses: { 200: { description: 'Credit', schema: ok({ credit: required({ credit_czk: num, credit_eur: num }) }) }, ...restErrors } } },
    '/v1/messages': {
      get: {
        summary: 'Sent messages of a day, one row per recipient', query: messagesQuery,
        responses: {
          200: {
            description: 'A page; with MESSAGE_RETENTION_DAYS set, messages older than the retention whose work is over are deleted and no longer listed',
            schema: ok({
              messages: Joi.array().items(required({
                message_id: str, message_parts: int, ts_sent: int, ts_delivered: int, sent: int, delivered: int, nondelivered: int, body: str, sender: str, to: str, flow: str,
              })),
              next_cursor: nullable(str),
            }),
          },
          ...restErrors,
        },
      },
    },
    '/v1/apikey/update': { post: { summary: 'This key\'s settings', body: { schema: keySettings }, responses: { 200: { description: 'Saved', schema: ok({}) }, ...restErrors } } },
    '/v1/apikey/add': {
      post: {
        summary: 'Add a sub-key (primary key only)',
        body: { schema: obj({ note: str.max(255), shared: bool.required(), currency: str.valid('CZK', 'EUR').required(), default_callback_url: nullable(str.max(2048)) }) },
        responses: { 200: { description: 'The new key (shown once)', schema: ok({ apikey: str, id: int }) }, ...restErrors, ...subKeyRefused },
      },
    },
    '/v1/apikey/list': { get: { summary: 'Sub-keys', responses: { 200: { description: 'Sub-keys', schema: ok({ list: Joi.array().items(subKey) }) }, ...restErrors, ...subKeyRefused } } },
    '/v1/apikey/change': {
      post: {
        summary: 'Revoke, restore or rescope a sub-key (named by its id, or by the key itself)',
        body: {
          schema: Joi.object({
            id: int.min(1), apikey: str.description('the sub-key itself, instead of its id'), disable: Joi.valid(0, 1, true, false), scope,
          }).xor('id', 'apikey').or('disable', 'scope'),
        },
        responses: {
          200: { description: 'Changed', schema: ok({ id: int, disabled: bool, scope }) }, ...restErrors, ...subKeyRefused,
          404: { description: 'No sub-key of this account with that id or key', schema: restError },
        },
      },
    },
    '/v1/suppressions': {
      get: {
        summary: 'The account\'s suppression list (numbers that opted out, per channel family)', query: suppressionsQuery,
        responses: { 200: { description: 'A page in (family, phone) order', schema: ok({ suppressions: Joi.array().items(suppression), next_cursor: nullable(str) }) }, ...restErrors },
      },
      post: {
        summary: 'Suppress a number (every family unless one is named)',
        body: { schema: Joi.object({ phone_number: str.required(), family: str.valid(...FAMILIES) }) },
        responses: { 200: { description: 'The rows now on the list', schema: ok({ suppressions: Joi.array().items(suppression) }) }, ...restErrors },
      },
    },
    '/v1/suppressions/{phone}': {
      delete: {
        summary: 'Take a number off the list (every family unless ?family= names one)', path: { phone: { description: 'The phone number' } },
        query: obj({ family: str.valid(...FAMILIES) }),
        responses: { 200: { description: 'The rows removed', schema: ok({ removed: Joi.array().items(suppression) }) }, ...restErrors, 404: { description: 'Not on the list', schema: restError } },
      },
    },
    '/v1/webhooks/deliveries': {
      get: {
        summary: 'Recent webhook deliveries (a key its own; the primary key also its sub-keys\')', query: deliveriesQuerySchema,
        responses: { 200: { description: 'Newest first; with EVENT_RETENTION_DAYS set, batches delivered or dead-lettered longer ago than the retention are deleted', schema: ok({ deliveries: Joi.array().items(delivery), next_cursor: nullable(int) }) }, ...restErrors },
      },
    },
    '/v1/webhooks/replay': {
      post: {
        summary: 'Deliver own dead-lettered batches again', body: { schema: replayBodySchema },
        responses: { 200: { description: 'Back to pending; `ids` in ascending order', schema: ok({ replayed: int, ids: Joi.array().items(int) }) }, ...restErrors },
      },
    },
  },
};

// --- Verification ----------------------------------------------------------------------------

const verifyError = obj({ error: str.required(), message: str.required(), attemptsRemaining: int });
const phone = str.pattern(/^[1-9]\d{6,14}$/);
const token = { token: { description: 'The token from POST /v1/validations' } };
const verifyErrors = {
  400: { description: 'MISSING_FIELD, INVALID_REQUEST, INVALID_PHONE, INVALID_CODE (attemptsRemaining), EXPIRED', schema: verifyError },
  401: { description: 'MISSING_API_KEY, INVALID_API_KEY', schema: verifyError },
  404: { description: 'NOT_FOUND', schema: verifyError },
  413: { description: 'PAYLOAD_TOO_LARGE: a body over 256 KB', schema: verifyError },
  503: { description: 'SERVICE_UNAVAILABLE: Postgres (or, for a start, Redis) cannot be reached; nothing was stored (Retry-After)', schema: verifyError },
};
const sessionStatus = str.valid('pending', 'code_sent', 'verified', 'failed', 'expired');

const verification: DocumentSpec = {
  title: 'switchboard verification API',
  description: 'Phone-number verification with one-time codes and HMAC proofs (D8, docs/verification.md). Errors answer `{error, message}`.',
  securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
  security: KEY,
  paths: {
    '/v1/validations': {
      post: {
        summary: 'Start: send a 6-digit code by SMS', body: { schema: required({ phoneNumber: phone }) },
        responses: {
          200: { description: 'Started', schema: required({ token: str, status: Joi.valid('pending'), expiresAt: iso, timestamp: iso }) },
          ...verifyErrors, 402: { description: 'INSUFFICIENT_CREDIT', schema: verifyError },
          429: { description: 'TENANT_RATE_LIMIT, PHONE_RATE_LIMIT (Retry-After)', schema: verifyError },
        },
      },
    },
    '/v1/validations/{token}': {
      get: {
        summary: 'A session', path: token,
        responses: {
          200: { description: 'The session', schema: obj({ token: str.required(), status: sessionStatus.required(), phoneNumber: str.required(), expiresAt: iso.required(), timestamp: iso.required(), attemptsRemaining: int.required(), verifiedAt: iso }) },
          ...verifyErrors,
        },
      },
      patch: {
        summary: 'Check a proof against the stored session', path: token, body: { schema: required({ proof: str }) },
        responses: { 200: { description: 'Whether it is the proof issued', schema: obj({ valid: bool.required(), expired: Joi.valid(true), phoneNumber: str.required(), verifiedAt: nullable(iso).required() }) }, ...verifyErrors },
      },
    },
    '/v1/validations/{token}/verify': {
      post: {
        summary: 'Check the code the user entered', path: token, body: { schema: required({ code: str }) },
        responses: {
          200: { description: 'Verified (with a proof when the account has a verification secret)', schema: obj({ verified: Joi.valid(true).required(), phoneNumber: str.required(), token: str.required(), code: str.required(), timestamp: iso.required(), proof: str, verifiedAt: iso.required() }) },
          ...verifyErrors, 429: { description: 'TOO_MANY_ATTEMPTS', schema: verifyError },
        },
      },
    },
    '/v1/verify-proof': {
      post: {
        summary: 'Check a proof offline (no key: the proof is the credential)', security: [],
        body: { schema: required({ phoneNumber: phone, token: str, code: str, timestamp: str, proof: str }) },
        responses: { 200: { description: 'Whether the proof is valid', schema: obj({ valid: bool.required(), expired: Joi.valid(true) }) }, 400: verifyErrors[400], 413: verifyErrors[413], 503: verifyErrors[503] },
      },
    },
  },
};

// --- WhatsApp partner onboarding (D7) ---------------------------------------------------------

const waba = obj({ waba_id: str.description('WhatsApp Business Account id (`whatsapp_id` of accounts/list)') });
const partnerErrors = {
  ...restErrors,
  503: { description: 'No `whatsapp` carrier connection is configured for onboarding, or Postgres cannot be reached (Retry-After)', schema: restError },
};
const wabaErrors = {
  ...partnerErrors,
  404: { description: 'A WABA the calling key\'s account does not hold', schema: restError },
  502: { description: 'Graph refused the refresh (its `[code] title` in `message`)', schema: restError },
};
const whatsapp: DocumentSpec = {
  title: 'switchboard WhatsApp partner API',
  description: 'Onboarding partners\' clients to WhatsApp Business accounts (D7): signup gives a one-hour link to the hosted page; progress is POSTed to `partner_callback_url`. Failures answer `{success: false, message}`.',
  securitySchemes: API_KEY,
  security: KEY,
  paths: {
    '/v1/whatsapp/signup': {
      post: {
        summary: 'Start a client\'s signup',
        body: {
          schema: obj({
            partner_name: str.required(), partner_logo: str.uri(), partner_callback_url: str.uri().required(), partner_client_id: str.required(),
            partner_finish_url: str.uri().required(), phone_number: str.valid('manual', 'automatic'), wa_name: str, wa_email: str.email(), wa_website: str.uri(),
            country: str.length(2).description('ISO 3166 alpha-2'),
          }),
        },
        responses: { 200: { description: 'The hosted page\'s link (token: a JWT valid 1 hour)', schema: ok({ token: str, redirect_url: str.uri() }) }, ...partnerErrors, ...subKeyRefused },
      },
    },
    '/v1/whatsapp/accounts/list': {
      post: {
        summary: 'WABA accounts of the partner', body: { schema: waba, required: false },
        responses: {
          200: {
            description: 'Accounts',
            schema: ok({ accounts: Joi.array().items(obj({ client_id: str, whatsapp_name: str, whatsapp_id: str, whatsapp_currency: str, whatsapp_owner_name: str, whatsapp_owner_id: str, country: str }).unknown(true)) }),
          },
          ...wabaErrors,
        },
      },
    },
    '/v1/whatsapp/phone_numbers/list': {
      post: {
        summary: 'Phone numbers of a WABA', body: { schema: waba.fork(['waba_id'], (s) => s.required()) },
        responses: { 200: { description: 'Phone numbers', schema: ok({ phone_numbers: Joi.array().items(obj({ phone_number: str, phone_number_id: str, status: str }).unknown(true)) }) }, ...wabaErrors },
      },
    },
    '/v1/whatsapp/templates/list': {
      post: {
        summary: 'Templates of a WABA', body: { schema: waba.fork(['waba_id'], (s) => s.required()) },
        responses: { 200: { description: 'Templates', schema: ok({ templates: Joi.array().items(obj({ template_name: str, language: str, status: str, category: str }).unknown(true)) }) }, ...wabaErrors },
      },
    },
  },
};

// --- Admin (D11, D12) ---------------------------------------------------------------------------

const adminError = required({ error: str, message: str });
/** Every admin call reads or writes Postgres (the error handler's storage-outage answer, api/middleware/errors.ts). */
const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } } };
const adminUnavailable = {
  description: 'SERVICE_UNAVAILABLE: Postgres cannot be reached; retry later', schema: required({ error: Joi.valid('SERVICE_UNAVAILABLE'), message: str }), headers: retryAfter,
};
const adminErrors = {
  400: { description: 'Bad input; the message names the field', schema: adminError },
  401: { description: 'Missing or wrong ADMIN_TOKEN', schema: adminError },
  503: adminUnavailable,
};
const noAccount = { 404: { description: 'No such account', schema: adminError } };
const noKey = { 404: { description: 'No such key', schema: adminError } };
/** The errors of a call that reads a body. */
const adminBodyErrors = {
  ...adminErrors,
  413: { description: 'PAYLOAD_TOO_LARGE: a body over 256 KB', schema: adminError },
};
const id = { id: { description: 'Numeric id', schema: { type: 'integer', minimum: 1 } } };
const account = required({
  account_id: int, name: str.allow(''), country: str, currency: str.valid('CZK', 'EUR'), credit_czk: num, credit_eur: num, default_sender: nullable(str),
  verification_secret_set: bool, verification_attempts: int, verification_expiry_s: int, verification_template: str, verify_account_per_min: int,
  verify_phone_per_hour: int, verify_phone_cooldown_s: int, reply_window_days: int, opt_out_promotional: bool,
  opt_out_keywords: nullable(Joi.array().items(str)).description('null: the defaults (STOP, …)'), opt_in_keywords: nullable(Joi.array().items(str)),
  suppressions: int.description('numbers on the suppression list'), created_at: iso,
});
const keyListing = required({
  id: int, account_id: int, is_primary: bool, key_prefix: str, note: str.allow(''), shared: bool, currency: str.valid('CZK', 'EUR'), balance: num,
  default_callback_url: nullable(str), disabled: bool, scope: scope.required(), created_at: iso,
});
const priceRow = required({ channel: str.valid(...CHANNELS), prefix: str.allow(''), operator: int, price_czk: num, price_eur: num });
const connectionView = obj({
  name: str.required(), kind: str.required(), config: Joi.object().unknown(true).required().description('secrets masked'), routes: Joi.array().items(str.allow('')).required(),
  enabled: bool.required(), source: str.valid('admin', 'env').required(), state: str.valid('bound', 'ready', 'connecting', 'error', 'disabled', 'idle').required(),
  state_detail: str.description('the last error in words (ESME_RINVPASWD)'), url: str.description('older SMPP answer: the URL, password masked'),
});
const deadBatch = required({
  id: int, webhook_id: str, account_id: int, key_id: nullable(int), url: str, events: int, attempts: int, last_status: nullable(int), last_error: nullable(str), created_at: iso, dead_at: iso,
});
const adminSender = Joi.object({ id: int.required(), account_id: int.required(), family: str.valid(...FAMILIES).required(), sender: str.required(), connection: str.required() }).unknown(true);
const json = (schema: Joi.Schema) => ({ schema });

const admin: DocumentSpec = {
  title: 'switchboard admin API',
  description: 'Operator calls under /admin/api (D11, D12): accounts, keys, prices, numbers, dead letters, carrier connections and senders. Unknown fields are refused by name.',
  securitySchemes: ADMIN,
  security: [{ adminToken: [] }],
  paths: {
    '/admin/api/accounts': { post: { summary: 'Create an account', body: json(newAccountSchema), responses: { 201: { description: 'Its primary key (shown once)', schema: required({ account_id: int, api_key: str }) }, ...adminBodyErrors } } },
    '/admin/api/accounts/{id}': {
      get: { summary: 'An account', path: id, responses: { 200: { description: 'The account', schema: account }, ...adminErrors, ...noAccount } },
      patch: { summary: 'Change its settings', path: id, body: json(accountSettingsSchema), responses: { 200: { description: 'The account', schema: account }, ...adminBodyErrors, ...noAccount } },
    },
    '/admin/api/accounts/{id}/credit': { post: { summary: 'Add (or take) credit', path: id, body: json(creditSchema), responses: { 200: { description: 'Balances', schema: required({ credit_czk: num, credit_eur: num }) }, ...adminBodyErrors, ...noAccount } } },
    '/admin/api/keys': {
      get: { summary: 'Keys', query: obj({ account_id: int.min(1) }), responses: { 200: { description: 'Keys', schema: required({ keys: Joi.array().items(keyListing) }) }, ...adminErrors } },
    },
    '/admin/api/keys/{id}': { patch: { summary: 'A key\'s settings', path: id, body: json(keySettingsSchema), responses: { 200: { description: 'The key', schema: keyListing }, ...adminBodyErrors, ...noKey } } },
    '/admin/api/keys/{id}/credit': { post: { summary: 'Top up an own-credit sub-key', path: id, body: json(keyCreditSchema), responses: { 200: { description: 'Balance', schema: required({ id: int, currency: str, balance: num }) }, ...adminBodyErrors, ...noKey } } },
    '/admin/api/prices': {
      get: { summary: 'Price rows', responses: { 200: { description: 'Prices', schema: required({ prices: Joi.array().items(priceRow) }) }, ...adminErrors } },
      put: { summary: 'Upsert price rows (longest prefix wins; rows with an operator other than 0 are stored but price nothing: no connector learns a destination\'s operator)', body: json(pricesSchema), responses: { 200: { description: 'Rows written', schema: required({ updated: int }) }, ...adminBodyErrors } },
    },
    '/admin/api/numbers': {
      post: {
        summary: 'Assign a number or sender name for inbound traffic', body: json(numberAssignmentSchema),
        responses: {
          201: { description: 'Assigned', schema: required({ id: int, account_id: int, value: str, channels: Joi.array().items(str) }) }, ...adminBodyErrors, ...noAccount,
          409: { description: 'The number or name is assigned to another account', schema: adminError },
        },
      },
    },
    '/admin/api/webhooks/dead': {
      get: { summary: 'Dead-lettered webhook batches', query: obj({ key_id: int.min(1), since: iso }), responses: { 200: { description: 'Newest first; with EVENT_RETENTION_DAYS set, a dead letter (and its events) is deleted once it has been dead that long', schema: required({ batches: Joi.array().items(deadBatch) }) }, ...adminErrors } },
    },
    '/admin/api/webhooks/replay': {
      post: {
        summary: 'Replay dead letters', body: json(Joi.alternatives(required({ id: int.min(1) }), required({ key_id: int.min(1), since: iso }))),
        responses: { 200: { description: 'Back to pending (queued at once, or by the recovery sweep about a minute later while Redis is down)', schema: required({ replayed: int }) }, ...adminBodyErrors },
      },
    },
    '/admin/api/carriers': {
      get: { summary: 'Carrier connections with their live state', responses: { 200: { description: 'Connections', schema: required({ carriers: Joi.array().items(connectionView) }) }, ...adminErrors } },
      post: {
        summary: 'Create or replace a connection (kind\'s own config schema; secrets sealed)',
        body: json(Joi.object({ name: str.required(), kind: str.required(), config: Joi.object().unknown(true).required(), routes: Joi.array().items(str.allow('')), enabled: bool })),
        responses: { 200: { description: 'Replaced', schema: connectionView }, 201: { description: 'Created', schema: connectionView }, ...adminBodyErrors, 409: { description: 'A route is another connection\'s, or the name is a connection of another kind', schema: adminError } },
      },
    },
    '/admin/api/carriers/{name}': {
      delete: {
        summary: 'Delete a connection (its senders must be deleted first)', path: { name: { description: 'Connection name' } },
        responses: {
          200: { description: 'Deleted', schema: required({ deleted: str }) }, ...adminErrors, 404: { description: 'No such connection', schema: adminError },
          409: { description: 'Senders use the connection (the message names them)', schema: adminError },
        },
      },
    },
    '/admin/api/senders': {
      get: { summary: 'Senders', query: obj({ account_id: int.min(1) }), responses: { 200: { description: 'Senders (never credentials)', schema: required({ senders: Joi.array().items(adminSender) }) }, ...adminErrors } },
      post: {
        summary: 'Create or replace a sender on a channel family',
        body: json(Joi.object({ account_id: int.required(), family: str.valid(...FAMILIES).required(), sender: str.required(), connection: str.required(), credentials: Joi.object().unknown(true), details: Joi.object().unknown(true) })),
        responses: { 200: { description: 'Replaced', schema: adminSender }, 201: { description: 'Created', schema: adminSender }, ...adminBodyErrors, ...noAccount },
      },
    },
    '/admin/api/senders/{id}': {
      delete: { summary: 'Delete a sender', path: id, responses: { 200: { description: 'Deleted', schema: required({ deleted: int }) }, ...adminErrors, 404: { description: 'No such sender', schema: adminError } } },
    },
  },
};

// --- Webhooks (events POSTed to the customer) -------------------------------------------------

const channelObject = obj({ sender: str.required(), country: int.required(), operator: int.required(), price_czk: num.required(), price_eur: num.required(), count: int.required(), gateway: str });
export const sentMessageEvent = obj({
  request_id: str.required(), message_id: str.required(), gateway: str.valid(...CHANNELS).required(), timestamp: int.required(),
  payload: Joi.object().unknown(true).description('the message\'s payload, unchanged; left out when it had none, never null (D4)'),
  type: Joi.valid('outgoing').required(), to: required({ phone_number: str }),
  result: str.valid('sending', 'sent', 'delivered', 'seen', 'undelivered', 'rejected', 'failed').required(), result_info: str.required(),
  sms: channelObject, viber: channelObject, whatsapp_template: channelObject, whatsapp_body: channelObject,
});
export const incomingReplyEvent = obj({
  request_id: str.required(), message_id: str.required(), payload: Joi.object().unknown(true).description('the answered message\'s payload; left out when it had none, never null (D4)'), gateway: str.valid(...FAMILIES).required(),
  timestamp: int.required(), type: Joi.valid('incoming').required(), sender: str.required(), recipient: str.required(), body: str.allow('').required(),
});
export const incomingEvent = required({ gateway: str.valid(...FAMILIES), timestamp: int, type: Joi.valid('incoming'), sender: str, recipient: str, body: str.allow('') });
const delivered = { 200: { description: 'Any 2xx is success; anything else (or no answer within 10 s) is retried (D4)' } };
const signed = 'Signed with Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) when the key has a webhook_secret.';
const eventOp = (summary: string, event: Joi.Schema): Record<string, Operation> => ({
  post: { summary, description: `A JSON array of up to 100 events. ${signed}`, body: { schema: Joi.array().items(event).min(1).max(100) }, responses: delivered },
});

const webhooks: DocumentSpec = {
  title: 'switchboard webhooks',
  description: 'Events POSTed to the message\'s `callback` or the key\'s `default_callback_url`, batched per key and URL, retried with backoff, then dead-lettered (D4). Every body is a JSON array; `message_id` + `gateway` + `result` identifies a duplicate.',
  webhooks: {
    sentMessage: eventOp('Status of an outgoing message', sentMessageEvent),
    incomingReplyMessage: eventOp('A reply to a message sent within the reply window', incomingReplyEvent),
    incomingMessage: eventOp('Anything else sent to the account\'s numbers', incomingEvent),
  },
};

const SPECS: Record<FamilyName, DocumentSpec> = { sending, legacy, simple, xml, rest, verification, whatsapp, admin, webhooks };

/** Every family's document for a deployment (its PUBLIC_URL as the server). */
export function openApiDocuments(publicUrl: string, version: string): Record<FamilyName, JsonSchema> {
  return Object.fromEntries(FAMILY_NAMES.map((name) => [name, document(SPECS[name], version, publicUrl)])) as Record<FamilyName, JsonSchema>;
}
