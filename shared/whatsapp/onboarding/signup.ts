/**
 * Starting a signup (`POST /v1/whatsapp/signup`, D7) and opening its hosted page: a signup row
 * with the partner's fields, a one-hour JWT naming it, and on the page's first opening the
 * `signup_started` notification.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../../config.js';
import type { ApiKeyRecord } from '../../domain/keys.js';
import { AppError, forbidden } from '../../errors.js';
import type { SecretBox } from '../../secrets/sealed.js';
import { OnboardingUnavailableError, connectionByName, onboardingConnection, type OnboardingConnection } from './connection.js';
import { parseSignup } from './input.js';
import { recordStep, type NotifyDeps } from './notify.js';
import { insertSignup, loadSignup, type Signup } from './store.js';
import { SignupTokenError, TOKEN_TTL_SECONDS, signSignupToken, tokenKey, verifySignupToken } from './token.js';

export const ONBOARDING_PAGE_PATH = '/whatsapp/onboarding';

export interface OnboardingDeps extends NotifyDeps {
  box: SecretBox;
  config: Pick<Config, 'publicUrl' | 'production' | 'allowPrivateCallbacks' | 'whatsappOnboardingConnection' | 'whatsappSdkUrl' | 'whatsappGraphUrl' | 'whatsappGraphVersion'>;
}

/** An operator's missing configuration as the API answers it. */
export function unavailable(err: OnboardingUnavailableError): AppError {
  return new AppError(503, 'WHATSAPP_ONBOARDING_UNAVAILABLE', err.message);
}

export async function startSignup(deps: OnboardingDeps, key: ApiKeyRecord, body: unknown, now = Date.now()): Promise<{ token: string; redirect_url: string }> {
  if (!key.isPrimary) throw forbidden('Only the primary API key of the account can start a WhatsApp signup');
  const input = parseSignup(body, { allowPrivateCallbacks: deps.config.allowPrivateCallbacks, production: deps.config.production });
  let connection: OnboardingConnection;
  try {
    connection = await onboardingConnection(deps, deps.config.whatsappOnboardingConnection);
  } catch (err) {
    if (err instanceof OnboardingUnavailableError) throw unavailable(err);
    throw err;
  }
  const publicId = randomUUID();
  await insertSignup(deps.db, {
    publicId, accountId: key.accountId, keyId: key.id, connection: connection.name, input, expiresAt: new Date(now + TOKEN_TTL_SECONDS * 1000),
  });
  const token = await signSignupToken(await tokenKey(deps.db, deps.box), publicId, now);
  return { token, redirect_url: `${deps.config.publicUrl}${ONBOARDING_PAGE_PATH}` };
}

/** The signup a token names; SignupTokenError for a bad or expired token or a signup that is gone. */
export async function signupOfToken(deps: Pick<OnboardingDeps, 'db' | 'box'>, token: unknown): Promise<Signup> {
  const publicId = await verifySignupToken(await tokenKey(deps.db, deps.box), token);
  const signup = await loadSignup(deps.db, publicId);
  if (!signup) throw new SignupTokenError('invalid', 'the link names no signup');
  return signup;
}

export interface PageView {
  signup: Signup;
  connection: OnboardingConnection;
}

/**
 * What the hosted page needs. The first opening moves the signup to `started` and notifies the
 * partner (`signup_started`); every opening is logged.
 */
export async function openPage(deps: OnboardingDeps, token: unknown): Promise<PageView> {
  const signup = await signupOfToken(deps, token);
  if (signup.status === 'completed') return { signup, connection: await connectionByName(deps, signup.connection) };
  const connection = await connectionByName(deps, signup.connection);
  const entry = { at: new Date().toISOString(), event: 'page_opened' };
  const first = await recordStep(deps, signup, { status: 'started' }, [entry], { event: 'signup_started' }, ['created']);
  if (first) signup.status = 'started';
  else await recordStep(deps, signup, {}, [entry], null);
  return { signup, connection };
}
