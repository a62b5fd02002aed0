/**
 * The whatsapp carrier connection partner onboarding runs against (D12 config: `graph_url`,
 * `graph_version`, `app_id`, `app_secret`, `verify_token`, `signup_config_id`, `per_number_mps`):
 * its Meta app signs the client in (Embedded Signup) and exchanges the code for the client's
 * business token.
 *
 * The row is read here directly rather than through `loadConnections(db, box, PROVIDERS, ['whatsapp'])`
 * so that onboarding does not depend on the whatsapp provider module: the secrets are opened the
 * way `saveConnection` seals them with the `secretFields(['app_secret', 'verify_token'])` split (one
 * sealed JSON object bound to `carrier-connection:<name>`, joined back over the stored config).
 */
import type { Queryable } from '../../db/pool.js';
import type { SecretBox } from '../../secrets/sealed.js';
import { connectionAad } from '../../carriers/store.js';
import { DEFAULT_GRAPH_URL, DEFAULT_GRAPH_VERSION } from '../../carriers/whatsapp/graph.js';

export const WHATSAPP_KIND = 'whatsapp';

export interface OnboardingConnection {
  name: string;
  graphUrl: string;
  graphVersion: string;
  appId: string;
  appSecret: string;
  signupConfigId: string;
}

/** No connection to onboard with: an operator's problem, answered 503 with these words. */
export class OnboardingUnavailableError extends Error {
  override name = 'OnboardingUnavailableError';
}

interface Row {
  name: string;
  config: Record<string, unknown>;
  secrets: Buffer | null;
  enabled: boolean;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function toConnection(row: Row, box: SecretBox): OnboardingConnection {
  const config = { ...row.config, ...(row.secrets ? box.open(row.secrets, connectionAad(row.name)) : {}) };
  const appId = str(config.app_id);
  const appSecret = str(config.app_secret);
  const signupConfigId = str(config.signup_config_id);
  const missing = [!appId && 'app_id', !appSecret && 'app_secret', !signupConfigId && 'signup_config_id'].filter(Boolean);
  if (missing.length > 0) {
    throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: connection "${row.name}" has no ${missing.join(', ')}`);
  }
  return {
    name: row.name,
    graphUrl: str(config.graph_url) ?? DEFAULT_GRAPH_URL,
    graphVersion: str(config.graph_version) ?? DEFAULT_GRAPH_VERSION,
    appId: appId!, appSecret: appSecret!, signupConfigId: signupConfigId!,
  };
}

/**
 * The connection new signups use: the one named by WHATSAPP_ONBOARDING_CONNECTION, else the only
 * enabled whatsapp connection. Throws OnboardingUnavailableError saying what to configure.
 */
export async function onboardingConnection(db: Queryable, box: SecretBox, wanted: string | null): Promise<OnboardingConnection> {
  const { rows } = await db.query<Row>(
    `SELECT name, config, secrets, enabled FROM carrier_connections
      WHERE kind = $1 AND ($2::text IS NULL OR name = $2) ORDER BY name`,
    [WHATSAPP_KIND, wanted],
  );
  if (wanted !== null) {
    const row = rows[0];
    if (!row) throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: WHATSAPP_ONBOARDING_CONNECTION names "${wanted}", which is not a whatsapp carrier connection`);
    if (!row.enabled) throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: the whatsapp connection "${wanted}" is disabled`);
    return toConnection(row, box);
  }
  const enabled = rows.filter((r) => r.enabled);
  if (enabled.length === 0) throw new OnboardingUnavailableError('WhatsApp onboarding is not configured: there is no enabled whatsapp carrier connection');
  if (enabled.length > 1) {
    throw new OnboardingUnavailableError(
      `WhatsApp onboarding is not configured: ${enabled.length} whatsapp connections are enabled (${enabled.map((r) => r.name).join(', ')}); name one in WHATSAPP_ONBOARDING_CONNECTION`);
  }
  return toConnection(enabled[0]!, box);
}

/** A connection by name (a signup's or a WABA's, enabled or not: its app issued the token). */
export async function connectionByName(db: Queryable, box: SecretBox, name: string): Promise<OnboardingConnection> {
  const { rows } = await db.query<Row>('SELECT name, config, secrets, enabled FROM carrier_connections WHERE kind = $1 AND name = $2', [WHATSAPP_KIND, name]);
  const row = rows[0];
  if (!row) throw new OnboardingUnavailableError(`the whatsapp connection "${name}" no longer exists`);
  return toConnection(row, box);
}
