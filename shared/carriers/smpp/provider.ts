/**
 * The `smpp` connector kind: SMS over SMPP 3.4 connections. A connection's configuration is its
 * URL (`smpp://system_id:password@host:port?window=…&tps=…`, see parseSmppUrl); the password is
 * its secret (stored sealed, masked in answers). SMPP_URL defines the connection `default`, which
 * the admin API cannot change. SMS steps go to the connection whose destination prefix matches
 * longest; on an equal prefix a stored route beats SMPP_URL. A receiver-only bind sends nothing and
 * reports receipts under the name of a sending bind to the same SMSC (host, port, system_id), so
 * they match the ids that connection registered.
 */
import Joi from 'joi';
import type { CarrierProvider, ConnectionSpec } from '../provider.js';
import { parseSmppUrl, SmppUrlError, type SmppUrlOptions } from './session.js';
import { SmppCarrier } from './carrier.js';
import { trackCarrierWindow } from '../../metrics.js';

export interface SmppConfig {
  [key: string]: unknown;
  url: string;
}

/** Name of the connection that SMPP_URL defines (reserved: the admin API refuses it). */
export const ENV_CONNECTION = 'default';

/** The URL without its password, and the password. */
function splitUrl(raw: string): { url: string; password: string | null } {
  try {
    const url = new URL(raw.trim());
    if (!url.password) return { url: raw.trim(), password: null };
    const password = decodeURIComponent(url.password);
    url.password = '';
    return { url: url.toString(), password };
  } catch {
    return { url: raw, password: null };
  }
}

function withPassword(raw: string, password: string | undefined): string {
  if (password === undefined) return raw;
  const url = new URL(raw);
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** The URL with its password replaced by `***` (for answers and logs). */
export function maskSmppUrl(raw: string): string {
  try {
    const url = new URL(raw.trim());
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}

function parsed(spec: ConnectionSpec<SmppConfig>): SmppUrlOptions {
  return parseSmppUrl(spec.config.url);
}

/** The sending connection whose name a receiver bind reports under (same host, port and system_id). */
function namespaceOf(spec: ConnectionSpec<SmppConfig>, all: ReadonlyArray<ConnectionSpec<SmppConfig>>): string {
  const me = parsed(spec);
  if (me.bindMode !== 'receiver') return spec.name;
  const sender = all.find((o) => {
    const other = parseSmppUrl(o.config.url);
    return other.bindMode !== 'receiver' && other.host === me.host && other.port === me.port && other.systemId === me.systemId;
  });
  return sender?.name ?? spec.name;
}

export const smppProvider: CarrierProvider<SmppConfig> = {
  kind: 'smpp',
  channels: ['sms'],
  family: 'sms',
  routing: 'prefix',
  configSchema: Joi.object<SmppConfig>({ url: Joi.string().min(1).max(2048).required() }),
  splitSecrets(config) {
    const { url, password } = splitUrl(config.url);
    const secrets: Record<string, string> = {};
    if (password !== null) secrets.password = password;
    return { config: { url }, secrets };
  },
  joinSecrets: (config, secrets) => ({ url: withPassword(String(config.url), secrets.password) }),
  mask: (config) => ({ url: maskSmppUrl(config.url) }),
  check(spec) {
    let options: SmppUrlOptions;
    try {
      options = parseSmppUrl(spec.config.url);
    } catch (err) {
      // Errors never quote the password (parseSmppUrl).
      if (err instanceof SmppUrlError) return `config.url: ${err.message}`;
      throw err;
    }
    if (options.bindMode === 'receiver' && spec.routes.length > 0) return 'routes: a receiver bind cannot send; store it without routes';
    return null;
  },
  sends: (spec) => parsed(spec).bindMode !== 'receiver',
  reservedNames: [ENV_CONNECTION],
  envConnections: (config) => (config.smppUrl
    ? [{ name: ENV_CONNECTION, kind: 'smpp', config: { url: config.smppUrl }, routes: [''], enabled: true, source: 'env' }]
    : []),
  fingerprint: (spec, all) => `${spec.config.url}\u0000${namespaceOf(spec, all)}`,
  open(spec, all, ctx) {
    const url = parsed(spec);
    const carrier = new SmppCarrier({
      connection: spec.name,
      url,
      sink: ctx.sink,
      redis: ctx.redis,
      redisPrefix: ctx.config.redisPrefix,
      refNamespace: namespaceOf(spec, all),
      logger: ctx.logger,
    });
    carrier.start();
    ctx.logger.info({ connection: spec.name, host: url.host, port: url.port, bind: url.bindMode, window: url.window, tps: url.tps }, 'SMPP connection started');
    const untrack = trackCarrierWindow('smpp', spec.name, () => ({ size: carrier.window, inUse: carrier.stats.carrierInFlight }));
    return {
      carrier,
      sends: url.bindMode !== 'receiver',
      state: () => (carrier.state === 'bound'
        ? { state: 'bound' }
        : { state: carrier.lastError ? 'error' : 'connecting', ...(carrier.lastError && { detail: carrier.lastError }) }),
      close: () => {
        untrack();
        return carrier.close();
      },
    };
  },
};
