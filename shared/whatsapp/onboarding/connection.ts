/**
 * The whatsapp carrier connection partner onboarding runs against (D12 config: `graph_url`,
 * `graph_version`, `app_id`, `app_secret`, `verify_token`, `signup_config_id`, `per_number_mps`):
 * its Meta app signs the client in (Embedded Signup) and exchanges the code for the client's
 * business token.
 *
 * It is read through the connector seam (`loadConnections` with the `whatsapp` provider), and its
 * Graph host and version default to WHATSAPP_GRAPH_URL / WHATSAPP_GRAPH_VERSION as the carrier's do.
 */
import type { Queryable } from '../../db/pool.js';
import type { Config } from '../../config.js';
import type { SecretBox } from '../../secrets/sealed.js';
import type { ConnectionSpec } from '../../carriers/provider.js';
import { PROVIDERS } from '../../carriers/providers.js';
import { loadConnections } from '../../carriers/store.js';

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

export interface ConnectionDeps {
  db: Queryable;
  box: SecretBox;
  config: Pick<Config, 'whatsappGraphUrl' | 'whatsappGraphVersion'>;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function toConnection(row: ConnectionSpec, deps: ConnectionDeps): OnboardingConnection {
  const config = row.config;
  const appId = str(config.app_id);
  const appSecret = str(config.app_secret);
  const signupConfigId = str(config.signup_config_id);
  const missing = [!appId && 'app_id', !appSecret && 'app_secret', !signupConfigId && 'signup_config_id'].filter(Boolean);
  if (missing.length > 0) {
    throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: connection "${row.name}" has no ${missing.join(', ')}`);
  }
  return {
    name: row.name,
    graphUrl: str(config.graph_url) ?? deps.config.whatsappGraphUrl,
    graphVersion: str(config.graph_version) ?? deps.config.whatsappGraphVersion,
    appId: appId!, appSecret: appSecret!, signupConfigId: signupConfigId!,
  };
}

/**
 * The connection new signups use: the one named by WHATSAPP_ONBOARDING_CONNECTION, else the only
 * enabled whatsapp connection. Throws OnboardingUnavailableError saying what to configure.
 */
export async function onboardingConnection(deps: ConnectionDeps, wanted: string | null): Promise<OnboardingConnection> {
  const rows = await loadConnections(deps.db, deps.box, PROVIDERS, [WHATSAPP_KIND], wanted);
  if (wanted !== null) {
    const row = rows[0];
    if (!row) throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: WHATSAPP_ONBOARDING_CONNECTION names "${wanted}", which is not a whatsapp carrier connection`);
    if (!row.enabled) throw new OnboardingUnavailableError(`WhatsApp onboarding is not configured: the whatsapp connection "${wanted}" is disabled`);
    return toConnection(row, deps);
  }
  const enabled = rows.filter((r) => r.enabled);
  if (enabled.length === 0) throw new OnboardingUnavailableError('WhatsApp onboarding is not configured: there is no enabled whatsapp carrier connection');
  if (enabled.length > 1) {
    throw new OnboardingUnavailableError(
      `WhatsApp onboarding is not configured: ${enabled.length} whatsapp connections are enabled (${enabled.map((r) => r.name).join(', ')}); name one in WHATSAPP_ONBOARDING_CONNECTION`);
  }
  return toConnection(enabled[0]!, deps);
}

/** A connection by name (a signup's or a WABA's, enabled or not: its app issued the token). */
export async function connectionByName(deps: ConnectionDeps, name: string): Promise<OnboardingConnection> {
  const row = (await loadConnections(deps.db, deps.box, PROVIDERS, [WHATSAPP_KIND], name))[0];
  if (!row) throw new OnboardingUnavailableError(`the whatsapp connection "${name}" no longer exists`);
  return toConnection(row, deps);
}
