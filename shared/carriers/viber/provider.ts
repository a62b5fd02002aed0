/**
 * The `viber` connector kind (D12): Viber business messages through one of two dialects per
 * connection, `official` (Viber's partner-facing API) or `partner` (a partner's flat JSON API);
 * docs/viber.md.
 *
 * Configuration: `dialect`, `base_url` (default: the dialect's public host), `credentials` (the
 * partner dialect's API key), `callback_token` (the unguessable last segment of the connection's
 * callback URL), `shared_secret` (optional `x-callback-secret` header value), `allowed_sources`
 * (addresses and CIDR ranges callbacks may come from; none = any), `mps` (messages per second for
 * the connection across every worker process; none = no cap). The three secrets are sealed at rest
 * and masked in answers.
 *
 * Steps go through the connection of the account's sender row that the step names (D12): its
 * `details.service_id` (official) or `details.source_name` (partner) is what Viber knows the
 * sender by. Callbacks arrive at `/callbacks/viber/<connection>/<callback_token>` (the partner
 * dialect is given that URL with every message; the official one is registered with Viber).
 */
import { createHash } from 'node:crypto';
import Joi from 'joi';
import type { CallbackOutcome, CarrierProvider, ConnectionSpec, ProviderContext, SenderSpec } from '../provider.js';
import { carrierBaseUrl, secretFields } from '../provider.js';
import type { CallbackRequest } from '../http-carrier.js';
import { carrierConfigChanges, loadSenders } from '../store.js';
import { authorizeCallback, invalidSourceEntries } from './callback-auth.js';
import { VIBER_ADAPTERS } from './client.js';
import { PARTNER_SOURCE_MAX } from './partner.js';
import { VIBER_DIALECTS, senderField, type ViberDialect } from './types.js';
import { ViberCarrier, viberCarrierName } from './carrier.js';
import { callbackReports } from './reports.js';

export interface ViberConfig {
  [key: string]: unknown;
  dialect: ViberDialect;
  base_url?: string;
  credentials?: string;
  callback_token: string;
  shared_secret?: string;
  allowed_sources?: string[];
  mps?: number;
}

const SECRETS = ['credentials', 'callback_token', 'shared_secret'] as const;

/** A path segment nobody can guess: at least 24 URL-safe characters. */
const TOKEN_RE = /^[A-Za-z0-9._~-]{24,256}$/;
/** A header value: printable ASCII, no spaces. */
const HEADER_VALUE_RE = /^[\x21-\x7e]{16,256}$/;

const configSchema = Joi.object<ViberConfig>({
  dialect: Joi.string().valid(...VIBER_DIALECTS).required(),
  base_url: carrierBaseUrl,
  credentials: Joi.string().min(1).max(4096).when('dialect', {
    is: 'partner',
    then: Joi.required().messages({ 'any.required': 'is required for the partner dialect (its API key)' }),
    otherwise: Joi.forbidden().messages({ 'any.unknown': 'is not used by the official dialect (Viber allowlists the caller address)' }),
  }),
  callback_token: Joi.string().pattern(TOKEN_RE).required()
    .messages({ 'string.pattern.base': 'must be 24 to 256 URL-safe characters (letters, digits, ".", "_", "~", "-")' }),
  shared_secret: Joi.string().pattern(HEADER_VALUE_RE)
    .messages({ 'string.pattern.base': 'must be 16 to 256 printable ASCII characters without spaces' }),
  allowed_sources: Joi.array().items(Joi.string().min(1).max(64)).max(100),
  mps: Joi.number().positive().max(100_000),
});

const senderDetails = Joi.object({
  service_id: Joi.number().integer().min(1).max(Number.MAX_SAFE_INTEGER),
  source_name: Joi.string().min(1).max(PARTNER_SOURCE_MAX),
}).or('service_id', 'source_name').messages({ 'object.missing': 'must have service_id (official dialect) or source_name (partner dialect)' });

/** The URL a connection's callbacks are posted to (the token is its last segment). */
export function viberCallbackUrl(publicUrl: string, connection: string, token: string): string {
  return `${publicUrl.replace(/\/$/, '')}/callbacks/viber/${encodeURIComponent(connection)}/${encodeURIComponent(token)}`;
}

/**
 * What received an inbound message (a service id, a source name) → the sender name registered for
 * it on this connection, so the D5 rule matches (phone, family, sender). With several rows (two
 * accounts naming one service id) the oldest row's name is used; tracking data still attributes
 * replies exactly. Read from Postgres, kept for a moment per process.
 */
class SenderNames {
  private entries = new Map<string, { at: number; names: Map<string, string> }>();
  constructor(private readonly ttlMs = 2_000) {
    carrierConfigChanges.on('changed', () => this.entries.clear());
  }

  async of(ctx: ProviderContext, spec: ConnectionSpec<ViberConfig>, now = Date.now()): Promise<Map<string, string>> {
    const key = `${spec.name}\u0000${spec.config.dialect}`;
    const hit = this.entries.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.names;
    const rows = await loadSenders(ctx.db, null, { families: ['viber'] });
    const field = senderField(spec.config.dialect);
    const names = new Map<string, string>();
    for (const row of [...rows].sort((a, b) => a.id - b.id)) {
      const value = row.details[field];
      if (row.connection === spec.name && (typeof value === 'number' || typeof value === 'string') && !names.has(String(value))) {
        names.set(String(value), row.sender);
      }
    }
    if (this.entries.size > 1000) this.entries.clear();
    this.entries.set(key, { at: now, names });
    return names;
  }
}

const senderNames = new SenderNames();

const json = (status: number, body: unknown): Omit<CallbackOutcome, 'reports' | 'inbound'> =>
  ({ status, body: JSON.stringify(body), contentType: 'application/json' });

async function callback(spec: ConnectionSpec<ViberConfig>, req: CallbackRequest, ctx: ProviderContext): Promise<CallbackOutcome> {
  const none = { reports: [], inbound: [] };
  const cfg = spec.config;
  // Who is calling, before anything of the body is read.
  const auth = authorizeCallback(req, {
    callbackToken: cfg.callback_token,
    ...(cfg.shared_secret !== undefined && { sharedSecret: cfg.shared_secret }),
    ...(cfg.allowed_sources !== undefined && { allowedSources: cfg.allowed_sources }),
  });
  if (!auth.ok) {
    ctx.logger.info({ connection: spec.name, status: auth.status, reason: auth.reason }, 'Viber callback refused');
    return { ...json(auth.status, { message: auth.status === 403 ? 'Forbidden' : 'Unauthorized' }), ...none };
  }
  if (req.method !== 'POST') return { ...json(405, { message: 'Callbacks are POSTed' }), ...none };
  let body: unknown;
  try {
    body = JSON.parse(req.rawBody.toString('utf8'));
  } catch {
    return { ...json(400, { message: 'body: must be JSON' }), ...none };
  }
  const events = VIBER_ADAPTERS[cfg.dialect].parseCallback(body);
  if (!Array.isArray(events)) return { ...json(400, { message: events.error }), ...none };
  const names = events.some((e) => e.kind === 'inbound') ? await senderNames.of(ctx, spec) : null;
  const { reports, inbound } = callbackReports(events, {
    carrier: viberCarrierName(spec.name),
    recipientOf: (to) => names?.get(to) ?? to,
  });
  return { ...json(200, { ok: true }), reports, inbound };
}

export const viberProvider: CarrierProvider<ViberConfig> = {
  kind: 'viber',
  channels: ['viber'],
  family: 'viber',
  routing: 'sender',
  configSchema,
  senderSchema: { credentials: Joi.object({}), details: senderDetails },
  ...secretFields<ViberConfig>(SECRETS),
  check(spec) {
    const bad = invalidSourceEntries(spec.config.allowed_sources ?? []);
    if (bad.length > 0) return `config.allowed_sources: ${bad.map((e) => JSON.stringify(e)).join(', ')} ${bad.length === 1 ? 'is' : 'are'} not an address or CIDR range`;
    return null;
  },
  checkSender(connection, sender) {
    const field = senderField(connection.config.dialect);
    if (sender.details[field] === undefined) {
      return `details.${field}: is required for the ${connection.config.dialect} dialect of connection "${connection.name}"`;
    }
    return null;
  },
  fingerprint(spec) {
    return createHash('sha256').update(JSON.stringify([spec.config.dialect, spec.config.base_url, spec.config.credentials, spec.config.callback_token,
      spec.config.mps])).digest('hex');
  },
  open(spec, _all, ctx) {
    const cfg = spec.config;
    const carrier = new ViberCarrier({
      connection: spec.name,
      dialect: cfg.dialect,
      ...(cfg.base_url && { baseUrl: cfg.base_url }),
      ...(cfg.credentials && { apiKey: cfg.credentials }),
      ...(cfg.dialect === 'partner' && { callbackUrl: viberCallbackUrl(ctx.config.publicUrl, spec.name, cfg.callback_token) }),
      ...(cfg.mps && { mps: cfg.mps }),
      sink: ctx.sink,
      redis: ctx.redis,
      redisPrefix: ctx.config.redisPrefix,
      logger: ctx.logger,
    });
    ctx.logger.info({ connection: spec.name, dialect: cfg.dialect, base_url: cfg.base_url ?? 'default', mps: cfg.mps ?? null }, 'Viber connection started');
    return {
      carrier,
      sends: true,
      state: () => carrier.state(),
      setSenders: (senders: SenderSpec[]) => carrier.setSenders(senders),
      close: () => carrier.close(),
    };
  },
  callback,
};
