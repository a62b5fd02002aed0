/**
 * What the WhatsApp onboarding tests share: a whatsapp connection stored the way the admin API
 * stores one (D12 config, `secretFields(['app_secret', 'verify_token'])`, with a provider declared
 * here because onboarding does not need the connector's provider module), and the partner events
 * a local receiver got for one signup.
 */
import Joi from 'joi';
import { Webhook } from 'standardwebhooks';
import { secretFields, type CarrierProvider } from '../../shared/carriers/provider.js';
import { saveConnection } from '../../shared/carriers/store.js';
import { SecretBox } from '../../shared/secrets/sealed.js';
import { DEFAULT_SEED } from '../../scripts/sim/whatsapp/seed.js';
import { waitFor, type Receiver, type TestService } from './harness.js';

export const SIGNUP_CONFIG_ID = '778899001122';

/** The whatsapp kind as D12 configures it, for storing connections in tests only. */
export const whatsappTestProvider: CarrierProvider = {
  kind: 'whatsapp',
  channels: ['whatsapp_text', 'whatsapp_template'],
  family: 'whatsapp',
  routing: 'sender',
  configSchema: Joi.object({
    graph_url: Joi.string().uri(), graph_version: Joi.string(), app_id: Joi.string().required(), app_secret: Joi.string().required(),
    verify_token: Joi.string().required(), signup_config_id: Joi.string(), per_number_mps: Joi.number(),
  }),
  ...secretFields(['app_secret', 'verify_token']),
  fingerprint: () => 'test',
  open: () => {
    throw new Error('the test provider runs no connection');
  },
};

/** The D12 config of a connection to the simulator's app. */
export function simConnectionConfig(simUrl: string): Record<string, unknown> {
  return {
    graph_url: simUrl, graph_version: 'v25.0', app_id: DEFAULT_SEED.app.id, app_secret: DEFAULT_SEED.app.secret,
    verify_token: DEFAULT_SEED.app.verify_token, signup_config_id: SIGNUP_CONFIG_ID, per_number_mps: 80,
  };
}

export async function storeWhatsappConnection(svc: TestService, name: string, config: Record<string, unknown>, enabled = true): Promise<void> {
  await saveConnection(svc.runtime.db, new SecretBox(svc.config.credentialsKey), whatsappTestProvider,
    { name, kind: 'whatsapp', config, routes: [], enabled, source: 'admin' });
}

/**
 * The partner events of one signup (callback path `/partner/<name>`) in their sequence, once `last`
 * and every event before it arrived (deliveries may overtake one another). With `secret`, every
 * POST's Standard Webhooks signature is verified.
 */
export async function partnerEvents(rx: Receiver, name: string, last: string, secret?: string): Promise<any[]> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const requests = () => rx.requests.filter((r) => r.path === `/partner/${name}`);
  const events = await waitFor(() => {
    const evs = requests().flatMap((r) => r.events);
    const end = evs.find((e) => e.event === last);
    const seen = new Set(evs.map((e) => e.sequence));
    return end && Array.from({ length: end.sequence }, (_, i) => i + 1).every((n) => seen.has(n)) ? evs : null;
  }, 15_000, `the ${last} event of ${name} and those before it`);
  if (secret) for (const r of requests()) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
  return [...events].sort((x, y) => x.sequence - y.sequence);
}
