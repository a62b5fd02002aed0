/**
 * The operator's carrier operations (D12), for the admin API and the CLI: connections of every
 * connector kind, checked by their kind's schema, and senders as their own resource. Secrets are
 * write-only: sealed when stored, masked in every answer, never logged.
 */
import Joi from 'joi';
import type { Redis } from '../redis.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { FAMILIES, type Family } from '../channels/index.js';
import { validate } from '../validation.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import type { SecretBox } from '../secrets/sealed.js';
import { SECRET_MASK, type CarrierProvider, type ConnectionConfig, type ConnectionSpec, type ConnectionState, type SenderSpec } from './provider.js';
import { PROVIDERS } from './providers.js';
import { readConnectionStates } from './connections.js';
import {
  CONNECTION_NAME_RE, ConnectionConflictError, carrierConfigChanges, deleteConnection, deleteSender, loadConnections, loadSenders,
  saveConnection, saveSender,
} from './store.js';

export interface CarrierAdminDeps {
  db: Db;
  redis: Redis;
  config: Config;
  box: SecretBox;
}

/** A connection as answers show it. */
export interface ConnectionView {
  name: string;
  kind: string;
  config: ConnectionConfig;
  routes: string[];
  enabled: boolean;
  source: 'admin' | 'env';
  /** Live: the best state of any process running it; `idle` when no process runs it. */
  state: ConnectionState['state'] | 'idle';
  state_detail?: string;
  /** The older SMPP answer's field (the URL, password masked), kept for its clients. */
  url?: string;
}

const routesSchema = Joi.array()
  .items(Joi.string().allow('').pattern(/^[0-9]{0,15}$/).messages({ 'string.pattern.base': 'must be up to 15 digits' }))
  .unique()
  .max(1000)
  .default([]);

const connectionSchema = Joi.object<{ name: string; kind: string; config: ConnectionConfig; routes: string[]; enabled: boolean }>({
  name: Joi.string().pattern(CONNECTION_NAME_RE).required().messages({ 'string.pattern.base': 'must be 1-40 letters, digits, "_" or "-"' }),
  kind: Joi.string().valid(...PROVIDERS.keys()).required(),
  config: Joi.object().unknown(true).required(),
  routes: routesSchema,
  enabled: Joi.boolean().default(true),
});

/** The older SMPP body, `{name, url, routes?, enabled?}`, meaning `kind: "smpp", config: {url}`. */
const legacySmppSchema = Joi.object<{ name: string; url: string; routes: string[]; enabled: boolean }>({
  name: connectionSchema.extract('name'),
  url: Joi.string().min(1).max(2048).required(),
  routes: routesSchema,
  enabled: Joi.boolean().default(true),
});

function providerOf(kind: string): CarrierProvider {
  const provider = PROVIDERS.get(kind);
  if (!provider) throw badRequest(`kind: must be one of ${[...PROVIDERS.keys()].join(', ')}`);
  return provider;
}

function envConnections(config: Config): ConnectionSpec[] {
  return [...PROVIDERS.values()].flatMap((p) => p.envConnections?.(config) ?? []);
}

function present(spec: ConnectionSpec, states: Map<string, ConnectionState>): ConnectionView {
  const provider = providerOf(spec.kind);
  const config = provider.mask(spec.config);
  const state = states.get(spec.name);
  return {
    name: spec.name, kind: spec.kind, config, routes: spec.routes, enabled: spec.enabled, source: spec.source,
    state: spec.enabled ? (state?.state ?? 'idle') : 'disabled',
    ...(state?.detail !== undefined && { state_detail: state.detail }),
    ...(typeof config.url === 'string' && spec.kind === 'smpp' && { url: config.url }),
  };
}

/** `POST /admin/api/carriers`: creates or replaces a connection; `created` tells which. */
export async function storeConnection(deps: CarrierAdminDeps, body: unknown): Promise<{ created: boolean; connection: ConnectionView }> {
  const isLegacy = body !== null && typeof body === 'object' && 'url' in body && !('kind' in body) && !('config' in body);
  const input = isLegacy
    ? (({ url, ...rest }) => ({ ...rest, kind: 'smpp', config: { url } }))(validate(legacySmppSchema, body, { convert: true }))
    : validate(connectionSchema, body, { convert: true });
  const provider = providerOf(input.kind);
  if (envConnections(deps.config).some((c) => c.name === input.name)) {
    throw badRequest(`name: "${input.name}" is defined by the environment and cannot be stored`, 'VALIDATION', { field: 'name' });
  }
  if ([...PROVIDERS.values()].some((p) => p.reservedNames?.includes(input.name))) {
    throw badRequest(`name: "${input.name}" is reserved for a connection the environment defines (SMPP_URL's)`, 'VALIDATION', { field: 'name' });
  }
  const { value: config, error } = provider.configSchema.validate(input.config, { abortEarly: true, convert: true });
  if (error) {
    const detail = error.details[0];
    const path = detail?.path.length ? `config.${detail.path.join('.')}` : 'config';
    throw badRequest(`${path}: ${(detail?.message ?? error.message).replace(/^"[^"]*" /, '')}`, 'VALIDATION', { field: path });
  }
  // A secret given as the mask the service shows (`***`, an answer posted back) would be stored as the secret.
  const masked = Object.entries(provider.splitSecrets(config).secrets).find(([, v]) => v === SECRET_MASK);
  if (masked) {
    // A secret that is part of a field (an SMPP URL's password) is named by that field.
    const field = isLegacy ? 'url' : masked[0] in config ? `config.${masked[0]}` : 'config.url';
    throw badRequest(`${field}: holds the mask shown for a stored secret (${masked[0]}); give the secret itself`, 'VALIDATION', { field });
  }
  const spec: ConnectionSpec = { name: input.name, kind: provider.kind, config, routes: input.routes, enabled: input.enabled, source: 'admin' };
  const problem = provider.check?.(spec);
  if (problem) throw badRequest(isLegacy ? problem.replace(/^config\.url:/, 'url:') : problem, 'VALIDATION', { field: problem.split(':')[0] });
  let saved: Awaited<ReturnType<typeof saveConnection>>;
  try {
    saved = await saveConnection(deps.db, deps.box, provider, spec);
  } catch (err) {
    if (err instanceof ConnectionConflictError) throw conflict(err.message);
    throw err;
  }
  carrierConfigChanges.emit('changed');
  return { created: saved.created, connection: present(saved.connection, new Map()) };
}

/** `GET /admin/api/carriers`: the environment's connections first, then the stored ones. */
export async function listConnectionViews(deps: CarrierAdminDeps): Promise<ConnectionView[]> {
  const [stored, states] = await Promise.all([
    loadConnections(deps.db, deps.box, PROVIDERS, null),
    readConnectionStates(deps.redis, deps.config.redisPrefix).catch(() => new Map<string, ConnectionState>()),
  ]);
  return [...envConnections(deps.config), ...stored].map((spec) => present(spec, states));
}

export async function removeConnection(deps: CarrierAdminDeps, name: string): Promise<void> {
  if (envConnections(deps.config).some((c) => c.name === name)) {
    throw new AppError(400, 'BAD_REQUEST', `"${name}" is defined by the environment (SMPP_URL); unset it to remove the connection`);
  }
  const outcome = await deleteConnection(deps.db, name);
  if (outcome.result === 'missing') throw notFound(`carrier connection "${name}" not found`);
  if (outcome.result === 'in use') {
    // Deleting it took its senders (and their sealed credentials) with it, without a word.
    throw conflict(`carrier connection "${name}" is used by sender${outcome.senders.length > 1 ? 's' : ''} ${outcome.senders.join(', ')}; delete ${outcome.senders.length > 1 ? 'them' : 'it'} first (DELETE /admin/api/senders/:id)`);
  }
  carrierConfigChanges.emit('changed');
}

export interface SenderView {
  id: number;
  account_id: number;
  family: Family;
  sender: string;
  connection: string;
  details: Record<string, unknown>;
}

const senderSchema = Joi.object<{
  account_id: number; family: Family; sender: string; connection: string; credentials: Record<string, string>; details: Record<string, unknown>;
}>({
  account_id: Joi.number().integer().min(1).max(Number.MAX_SAFE_INTEGER).required(),
  family: Joi.string().valid(...FAMILIES).required(),
  sender: Joi.string().min(1).max(100).pattern(/\S/).required().messages({ 'string.pattern.base': '{{#label}} must not be blank' }),
  connection: Joi.string().pattern(CONNECTION_NAME_RE).required(),
  credentials: Joi.object().pattern(Joi.string(), Joi.string().max(4096)).default({}),
  details: Joi.object().unknown(true).default({}),
});

const presentSender = (s: SenderSpec): SenderView =>
  ({ id: s.id, account_id: s.accountId, family: s.family, sender: s.sender, connection: s.connection, details: s.details });

/** `POST /admin/api/senders`: creates or replaces an account's sender (by account, family and sender). */
export async function storeSender(deps: CarrierAdminDeps, body: unknown): Promise<{ created: boolean; sender: SenderView }> {
  const input = validate(senderSchema, body, { convert: true });
  const providers = [...PROVIDERS.values()].filter((p) => p.family === input.family && p.routing === 'sender');
  if (providers.length === 0) {
    throw badRequest(`family: no connector routes ${input.family} steps by sender`, 'VALIDATION', { field: 'family' });
  }
  const { rows: accounts } = await deps.db.query('SELECT 1 FROM accounts WHERE id = $1', [input.account_id]);
  if (accounts.length === 0) throw notFound(`account_id: account ${input.account_id} not found`);
  const stored = await loadConnections(deps.db, deps.box, PROVIDERS, null, input.connection);
  const provider = stored[0] ? providers.find((p) => p.kind === stored[0]!.kind) : undefined;
  if (provider?.senderSchema) {
    for (const part of ['credentials', 'details'] as const) {
      const { error } = provider.senderSchema[part].validate(input[part], { abortEarly: true, convert: false });
      if (error) {
        const path = [part, ...(error.details[0]?.path ?? [])].join('.');
        throw badRequest(`${path}: ${(error.details[0]?.message ?? error.message).replace(/^"[^"]*" /, '')}`, 'VALIDATION', { field: path });
      }
    }
  }
  const problem = provider && stored[0] ? provider.checkSender?.(stored[0], input) : null;
  if (problem) throw badRequest(problem, 'VALIDATION', { field: problem.split(':')[0] });
  try {
    const saved = await saveSender(deps.db, deps.box, {
      accountId: input.account_id, family: input.family, sender: input.sender, connection: input.connection,
      credentials: input.credentials, details: input.details,
    }, providers.map((p) => p.kind));
    carrierConfigChanges.emit('changed');
    return { created: saved.created, sender: presentSender(saved.sender) };
  } catch (err) {
    if (err instanceof ConnectionConflictError) throw badRequest(err.message, 'VALIDATION', { field: 'connection' });
    throw err;
  }
}

export async function listSenderViews(deps: CarrierAdminDeps, accountId: number | undefined): Promise<SenderView[]> {
  return (await loadSenders(deps.db, null, accountId === undefined ? {} : { accountId })).map(presentSender);
}

export async function removeSender(deps: CarrierAdminDeps, id: number): Promise<void> {
  if (!(await deleteSender(deps.db, id))) throw notFound(`sender ${id} not found`);
  carrierConfigChanges.emit('changed');
}
