/**
 * The connector seam. A connector kind (`smpp`, and each HTTP carrier) is one folder with one
 * `CarrierProvider`, listed once in `providers.ts`. A provider declares its connections'
 * configuration (schema, which fields are secret), opens a connection from stored configuration
 * (its Carrier, which the engine hands attempts to), says how attempts reach its connections
 * (destination prefixes, or the sender rows of an account), and, for HTTP carriers, reads its
 * callbacks. Everything else is generic: storing connections and senders with their secrets
 * sealed (store.ts), running the connections a process needs and merging their routes
 * (connections.ts), the admin API (D12) and the callback route `/callbacks/<kind>/<connection>`.
 */
import Joi from 'joi';
import type { Redis } from '../redis.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Channel, Family } from '../channels/index.js';
import type { Carrier, CarrierSink, InboundReport, StatusReport } from './types.js';
import type { CallbackRequest } from './http-carrier.js';

/** A connection's configuration as a provider sees it: stored fields and opened secrets together. */
export type ConnectionConfig = Record<string, unknown>;

/** One connection to run: stored through the admin API, or defined by the environment (SMPP_URL). */
export interface ConnectionSpec<C extends ConnectionConfig = ConnectionConfig> {
  name: string;
  kind: string;
  config: C;
  /** Destination prefixes the connection carries ('' = every destination). */
  routes: string[];
  enabled: boolean;
  source: 'admin' | 'env';
}

/** A sender of an account on a channel family and the connection that carries it (D12). */
export interface SenderSpec {
  id: number;
  accountId: number;
  family: Family;
  sender: string;
  connection: string;
  credentials: Record<string, string>;
  details: Record<string, unknown>;
}

/** How a connection is doing, in words an operator can act on. */
export interface ConnectionState {
  /** `bound` (SMPP), `ready` (HTTP carriers), `connecting`, `error`, `disabled`. */
  state: 'bound' | 'ready' | 'connecting' | 'error' | 'disabled';
  /** The last error in words (`ESME_RINVPASWD`, `401 Unauthorized`), when there is one. */
  detail?: string;
}

/** A running connection. */
export interface OpenConnection {
  carrier: Carrier;
  /** False for a connection that only receives (an SMPP receiver bind): no route points at it. */
  sends: boolean;
  state(): ConnectionState;
  /** Senders of this connection changed (sender-routed kinds get their rows, credentials opened). */
  setSenders?(senders: SenderSpec[]): void;
  close(): Promise<void>;
}

/** What a provider may use to run connections. */
export interface ProviderContext {
  db: Db;
  redis: Redis;
  config: Config;
  sink: CarrierSink;
  logger: Logger;
}

/** What one callback request comes to: the answer for the carrier and what to apply. */
export interface CallbackOutcome {
  status: number;
  body?: string;
  contentType?: string;
  reports: StatusReport[];
  inbound: InboundReport[];
}

export interface CarrierProvider<C extends ConnectionConfig = ConnectionConfig> {
  readonly kind: string;
  /** The channels its connections carry; all of one family (its dispatch pool starts them). */
  readonly channels: readonly Channel[];
  readonly family: Family;
  /**
   * `prefix`: a step goes to the connection whose destination prefix matches longest (SMS).
   * `sender`: to the connection of the account's sender row the step names (D12).
   */
  readonly routing: 'prefix' | 'sender';
  /** The `config` of `POST /admin/api/carriers` for this kind (secrets included, as given). */
  readonly configSchema: Joi.ObjectSchema<C>;
  /** For sender-routed kinds: the `credentials` and `details` of `POST /admin/api/senders`. */
  readonly senderSchema?: { credentials: Joi.ObjectSchema; details: Joi.ObjectSchema };
  /** For sender-routed kinds: checks of a sender against its connection (a dialect's own detail), as `<field>: <what is wrong>`, or null. */
  checkSender?(connection: ConnectionSpec<C>, sender: { credentials: Record<string, string>; details: Record<string, unknown> }): string | null;
  /** Splits a checked configuration into what is stored as it is and what is sealed. */
  splitSecrets(config: C): { config: ConnectionConfig; secrets: Record<string, string> };
  /** The configuration from its stored and opened parts (the inverse of `splitSecrets`). */
  joinSecrets(config: ConnectionConfig, secrets: Record<string, string>): C;
  /** The configuration as answers show it: every secret masked. */
  mask(config: C): ConnectionConfig;
  /** False for a connection that only receives (an SMPP receiver bind): it gets no routes. Default: true. */
  sends?(spec: ConnectionSpec<C>): boolean;
  /** Checks beyond the schema (the whole connection), as `<field>: <what is wrong>`, or null. */
  check?(spec: ConnectionSpec<C>): string | null;
  /** Connections the environment defines (SMPP_URL), which the admin API cannot change. */
  envConnections?(config: Config): Array<ConnectionSpec<C>>;
  /**
   * Names its environment connections take whenever they are configured (SMPP_URL's `default`):
   * never stored through the admin API, also while unset (set later, such an env connection hides
   * the stored one, which then cannot be deleted).
   */
  reservedNames?: readonly string[];
  /**
   * What distinguishes a running connection: when it changes, the connection is replaced. `all`:
   * every wanted connection of this kind (an SMPP receiver bind pairs with a sending one).
   */
  fingerprint(spec: ConnectionSpec<C>, all: ReadonlyArray<ConnectionSpec<C>>): string;
  open(spec: ConnectionSpec<C>, all: ReadonlyArray<ConnectionSpec<C>>, ctx: ProviderContext): OpenConnection;
  /**
   * Authenticates and reads one callback request (HTTP carriers), on the raw bytes. Runs in the web
   * process with the stored connection; never throws for what the carrier sent (a malformed body is
   * a 400, a bad signature a 401, and nothing is applied).
   */
  callback?(spec: ConnectionSpec<C>, req: CallbackRequest, ctx: ProviderContext): Promise<CallbackOutcome>;
}

/**
 * A carrier API's base URL (Viber's `base_url`, WhatsApp's `graph_url`): http(s), without
 * credentials. Requests never send a URL's user and password (the connection's own secrets
 * authenticate them), and a password there would be stored, shown and logged in clear.
 */
export const carrierBaseUrl = Joi.string().max(2048).uri({ scheme: ['http', 'https'] }).custom((value: string, helpers) => {
  const url = new URL(value);
  return url.username === '' && url.password === ''
    ? value
    : helpers.message({ custom: '{{#label}} must not hold a user or password (the connection\'s secrets authenticate its requests)' });
});

/** What answers show in place of a secret. */
export const SECRET_MASK = '***';

/** The default split for kinds whose secrets are whole fields of the configuration. */
export function secretFields<C extends ConnectionConfig>(fields: ReadonlyArray<keyof C & string>): Pick<CarrierProvider<C>, 'splitSecrets' | 'joinSecrets' | 'mask'> {
  return {
    splitSecrets(config) {
      const plain: ConnectionConfig = {};
      const secrets: Record<string, string> = {};
      for (const [k, v] of Object.entries(config)) {
        if ((fields as readonly string[]).includes(k) && typeof v === 'string') secrets[k] = v;
        else plain[k] = v;
      }
      return { config: plain, secrets };
    },
    joinSecrets: (config, secrets) => ({ ...config, ...secrets }) as C,
    mask(config) {
      const out: ConnectionConfig = {};
      for (const [k, v] of Object.entries(config)) out[k] = (fields as readonly string[]).includes(k) && v !== undefined ? SECRET_MASK : v;
      return out;
    },
  };
}
