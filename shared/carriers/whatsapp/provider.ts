/**
 * The `whatsapp` connector kind (D12): WhatsApp Cloud API connections over Meta's Graph. A
 * connection is one Meta app: where Graph is (`graph_url`, `graph_version`; the environment's
 * WHATSAPP_GRAPH_URL / WHATSAPP_GRAPH_VERSION when absent), the app's id and Embedded Signup
 * configuration (for onboarding), its secrets (`app_secret` signs the webhooks, `verify_token`
 * answers their handshake; sealed at rest, masked in answers) and the throughput cap per business
 * number (`per_number_mps`, default 80). Steps go through the connection of the account's sender
 * row they name (`routing: 'sender'`): `sender` is the phone number id, `credentials.access_token`
 * its business token, `details.waba_id` its WABA (for the template cache).
 *
 * The carrier is carrier.ts, the webhooks callback.ts; docs/whatsapp.md says what each does.
 */
import Joi from 'joi';
import { carrierBaseUrl, secretFields, type CarrierProvider } from '../provider.js';
import { GraphClient } from './graph.js';
import { WhatsappCarrier } from './carrier.js';
import { whatsappCallback } from './callback.js';

export interface WhatsappConfig {
  [key: string]: unknown;
  graph_url?: string;
  graph_version?: string;
  app_id?: string;
  app_secret: string;
  verify_token: string;
  signup_config_id?: string;
  per_number_mps: number;
}

export const DEFAULT_PER_NUMBER_MPS = 80;

const configSchema = Joi.object<WhatsappConfig>({
  graph_url: carrierBaseUrl,
  graph_version: Joi.string().pattern(/^v\d+\.\d+$/).messages({ 'string.pattern.base': 'must look like v25.0' }),
  app_id: Joi.string().pattern(/^\d{1,32}$/).messages({ 'string.pattern.base': 'must be the app\'s numeric id' }),
  app_secret: Joi.string().min(1).max(256).required(),
  verify_token: Joi.string().min(1).max(256).required(),
  signup_config_id: Joi.string().pattern(/^\d{1,32}$/).messages({ 'string.pattern.base': 'must be the configuration\'s numeric id' }),
  per_number_mps: Joi.number().integer().min(1).max(100_000).default(DEFAULT_PER_NUMBER_MPS),
});

export const whatsappProvider: CarrierProvider<WhatsappConfig> = {
  kind: 'whatsapp',
  channels: ['whatsapp_text', 'whatsapp_template'],
  family: 'whatsapp',
  routing: 'sender',
  configSchema,
  senderSchema: {
    credentials: Joi.object({ access_token: Joi.string().min(1).max(4096).required() }).unknown(true),
    details: Joi.object({
      waba_id: Joi.string().pattern(/^\d{1,32}$/).messages({ 'string.pattern.base': 'must be the WABA\'s numeric id' }),
    }).unknown(true),
  },
  ...secretFields<WhatsappConfig>(['app_secret', 'verify_token']),
  fingerprint: (spec) => JSON.stringify([spec.config.graph_url ?? null, spec.config.graph_version ?? null, spec.config.per_number_mps]),
  open(spec, _all, ctx) {
    const graph = new GraphClient({
      baseUrl: spec.config.graph_url ?? ctx.config.whatsappGraphUrl,
      version: spec.config.graph_version ?? ctx.config.whatsappGraphVersion,
      http: { metrics: { kind: 'whatsapp', connection: spec.name } },
    });
    const carrier = new WhatsappCarrier({
      connection: spec.name,
      graph,
      perNumberMps: spec.config.per_number_mps ?? DEFAULT_PER_NUMBER_MPS,
      db: ctx.db,
      redis: ctx.redis,
      redisPrefix: ctx.config.redisPrefix,
      sink: ctx.sink,
      logger: ctx.logger,
    });
    ctx.logger.info({ connection: spec.name, graphVersion: graph.version, perNumberMps: spec.config.per_number_mps }, 'WhatsApp connection started');
    return {
      carrier,
      sends: true,
      state: () => carrier.state(),
      setSenders: (senders) => carrier.setSenders(senders),
      close: () => carrier.close(),
    };
  },
  callback: (spec, req, ctx) => whatsappCallback(spec.name, spec.config, req, ctx),
};
