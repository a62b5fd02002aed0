/**
 * The backend half of Embedded Signup (channels.md 1.9), run when the hosted page posts what the
 * signup gave it: exchange the code for the client's business token, subscribe our app to the
 * WABA, register the number with a generated two-step PIN, read the WABA, its numbers and
 * templates, store them, and create the account's WhatsApp sender rows (D12). Each step is logged
 * on the signup and notified to the partner; a failure at any step marks the signup `failed` with
 * that step, notifies `failed`, and is answered with the step and Graph's `[code] title`.
 */
import { randomInt } from 'node:crypto';
import { withTx } from '../../db/pool.js';
import { AppError, badRequest, conflict } from '../../errors.js';
import { isPlainObject } from '../../rest/input.js';
import { GraphClient, GraphError } from '../../carriers/whatsapp/graph.js';
import type { GraphPhoneNumber, GraphTemplate, GraphWaba } from '../../carriers/whatsapp/types.js';
import { carrierConfigChanges, saveSender } from '../../carriers/store.js';
import { OnboardingUnavailableError, WHATSAPP_KIND, connectionByName } from './connection.js';
import { GRAPH_ID_RE } from './input.js';
import { recordStep } from './notify.js';
import { signupOfToken, type OnboardingDeps } from './signup.js';
import { rememberPin, replaceNumbers, replaceTemplates, saveWaba, storedPin, type LogEntry, type Signup } from './store.js';

/** Embedded Signup's `event` values the page forwards. */
export const FINISH_EVENTS = ['FINISH', 'FINISH_ONLY_WABA', 'FINISH_WHATSAPP_BUSINESS_APP_ONBOARDING'] as const;
export type FinishEvent = (typeof FINISH_EVENTS)[number];

export interface FinishInput {
  token: string;
  event: FinishEvent;
  code: string | null;
  wabaId: string | null;
  phoneNumberId: string | null;
  businessId: string | null;
}

export interface CancelInput {
  token: string;
  event: 'CANCEL';
  currentStep: string | null;
  /** The error variant of CANCEL: error_message, error_id, session_id (logged as given). */
  details: Record<string, string>;
}


// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const STEP_RE = /^[A-Z][A-Z0-9_]{0,63}$/;

/** Checks the page's call (pure). Ids Embedded Signup did not give may be absent; what is given must look right. */
export function parseCompletion(body: unknown): FinishInput | CancelInput {
  if (!isPlainObject(body)) throw badRequest('body: must be a JSON object');
  const problems: string[] = [];
  const str = (name: string, max: number, re?: RegExp): string | null => {
    const v = body[name];
    if (v === undefined || v === null || v === '') return null;
    if (typeof v !== 'string' || v.length > max || CONTROL.test(v) || (re && !re.test(v))) {
      problems.push(`${name}: is not valid`);
      return null;
    }
    return v;
  };
  const token = str('token', 4096);
  if (token === null && !problems.length) problems.push('token: is required');
  const event = body.event;
  if (event === 'CANCEL') {
    const details: Record<string, string> = {};
    for (const name of ['error_message', 'error_id', 'session_id']) {
      const v = str(name, 500);
      if (v !== null) details[name] = v;
    }
    const currentStep = str('current_step', 64, STEP_RE);
    if (problems.length) throw badRequest(problems.join('; '));
    return { token: token!, event, currentStep, details };
  }
  if (typeof event !== 'string' || !(FINISH_EVENTS as readonly string[]).includes(event)) {
    problems.push(`event: must be one of ${[...FINISH_EVENTS, 'CANCEL'].join(', ')}`);
  }
  const out = {
    token: token!, event: event as FinishEvent, code: str('code', 4096),
    wabaId: str('waba_id', 30, GRAPH_ID_RE), phoneNumberId: str('phone_number_id', 30, GRAPH_ID_RE), businessId: str('business_id', 30, GRAPH_ID_RE),
  };
  if (problems.length) throw badRequest(problems.join('; '));
  return out;
}

/** A 6-digit two-step PIN. */
export function generatePin(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0');
}

/** A step of the backend flow failed; `status` 502 when Graph refused or was unreachable. */
export class StepError extends AppError {
  constructor(status: number, readonly step: string, message: string) {
    super(status, 'WHATSAPP_ONBOARDING_STEP_FAILED', message, { step });
  }
}

const now = (): string => new Date().toISOString();

export async function cancelSignup(deps: OnboardingDeps, input: CancelInput): Promise<void> {
  const signup = await signupOfToken(deps, input.token);
  const entry: LogEntry = { at: now(), event: 'es_cancelled', current_step: input.currentStep, ...input.details };
  const ok = await recordStep(deps, signup, { status: 'cancelled', currentStep: input.currentStep },
    [entry], { event: 'es_cancelled', currentStep: input.currentStep, whatsappId: signup.wabaId }, 'open');
  if (!ok) throw conflict(signup.status === 'completed' ? 'This signup is already completed' : 'This signup is being completed');
}

/**
 * Runs the backend steps; answers where the browser goes next (the partner's finish URL). A
 * cancelled or failed signup may be tried again while its token is valid ('open' guard).
 */
export async function finishSignup(deps: OnboardingDeps, input: FinishInput): Promise<{ redirect_url: string; whatsapp_id: string }> {
  const signup = await signupOfToken(deps, input.token);
  const claimed = await recordStep(deps, signup,
    {
      status: 'completing', currentStep: null, error: null,
      ...(input.wabaId && { wabaId: input.wabaId }), ...(input.businessId && { businessId: input.businessId }),
      ...(input.phoneNumberId && { phoneNumberIds: [input.phoneNumberId] }),
    },
    [{ at: now(), event: 'es_finished', es_event: input.event, waba_id: input.wabaId, phone_number_id: input.phoneNumberId, business_id: input.businessId }],
    { event: 'es_finished', whatsappId: input.wabaId }, 'open');
  if (!claimed) {
    throw conflict(signup.status === 'completed' ? 'This signup is already completed' : 'This signup is being completed');
  }
  if (input.wabaId) signup.wabaId = input.wabaId;
  let step = 'embedded_signup';
  let graph: GraphClient | null = null;
  try {
    if (!input.code) throw new StepError(400, step, 'Embedded Signup gave no code');
    if (!input.wabaId) throw new StepError(400, step, 'Embedded Signup reported no WhatsApp Business Account');
    const wabaId = input.wabaId;
    step = 'configuration';
    const connection = await connectionByName(deps.db, deps.box, signup.connection);
    graph = new GraphClient({ baseUrl: connection.graphUrl, version: connection.graphVersion, http: { connections: 2, timeoutMs: 20_000 } });

    step = 'exchange_code';
    const { accessToken } = await graph.exchangeCode(connection.appId, connection.appSecret, input.code);
    await log(deps, signup, { at: now(), event: 'code_exchanged' });

    step = 'subscribe_app';
    await graph.subscribeApp(wabaId, accessToken);
    await saveWaba(deps.db, deps.box, {
      accountId: signup.accountId, waba: { id: wabaId }, signupId: signup.id, connection: connection.name, partnerClientId: signup.partnerClientId,
      businessId: input.businessId, country: signup.country, token: accessToken,
    });
    await recordStep(deps, signup, {}, [{ at: now(), event: 'waba_subscribed', waba_id: wabaId }], { event: 'waba_subscribed', whatsappId: wabaId });

    // The number the client chose in Embedded Signup; without one (only the WABA was shared), the
    // WABA's numbers not yet connected.
    step = 'read_numbers';
    const toRegister = input.phoneNumberId
      ? [input.phoneNumberId]
      : (await graph.listPhoneNumbers(wabaId, accessToken)).filter((n) => n.status !== 'CONNECTED').map((n) => n.id);
    step = 'register_number';
    const registered = new Set<string>();
    for (const phoneNumberId of toRegister) {
      const pin = (await storedPin(deps.db, deps.box, signup.accountId, phoneNumberId)) ?? generatePin();
      await rememberPin(deps.db, deps.box, signup.accountId, wabaId, phoneNumberId, pin);
      await graph.registerNumber(phoneNumberId, accessToken, pin);
      registered.add(phoneNumberId);
      await recordStep(deps, signup, { phoneNumberIds: [...registered] }, [{ at: now(), event: 'number_registered', phone_number_id: phoneNumberId }],
        { event: 'number_registered', whatsappId: wabaId, phoneNumberId });
    }

    step = 'read_waba';
    const waba: GraphWaba = await graph.getWaba(wabaId, accessToken);
    step = 'read_numbers';
    const numbers: GraphPhoneNumber[] = await graph.listPhoneNumbers(wabaId, accessToken);
    step = 'read_templates';
    const templates: GraphTemplate[] = await graph.listTemplates(wabaId, accessToken);

    step = 'store';
    await withTx(deps.db, async (tx) => {
      await saveWaba(tx, deps.box, {
        accountId: signup.accountId, waba, signupId: signup.id, connection: connection.name, partnerClientId: signup.partnerClientId,
        businessId: input.businessId, country: signup.country, token: accessToken,
      });
      await replaceNumbers(tx, signup.accountId, wabaId, numbers, registered);
      await replaceTemplates(tx, signup.accountId, wabaId, templates);
    });

    step = 'create_senders';
    for (const phoneNumberId of registered) {
      await saveSender(deps.db, deps.box, {
        accountId: signup.accountId, family: 'whatsapp', sender: phoneNumberId, connection: connection.name,
        credentials: { access_token: accessToken }, details: { waba_id: wabaId },
      }, [WHATSAPP_KIND]);
    }
    if (registered.size > 0) carrierConfigChanges.emit('changed');

    await recordStep(deps, signup, { status: 'completed', currentStep: null },
      [{ at: now(), event: 'completed', waba_id: wabaId, numbers: numbers.length, templates: templates.length, senders: [...registered] }],
      { event: 'completed', whatsappId: wabaId, phoneNumberId: [...registered][0] ?? null });
    return { redirect_url: signup.partnerFinishUrl, whatsapp_id: wabaId };
  } catch (err) {
    const failure = describe(err, step);
    if (failure.status >= 500 && !(err instanceof GraphError)) deps.logger.error({ err, step, signup: signup.publicId }, 'WhatsApp onboarding step failed');
    else deps.logger.warn({ step, signup: signup.publicId, error: failure.error }, 'WhatsApp onboarding step failed');
    await recordStep(deps, signup, { status: 'failed', currentStep: step, error: failure.error },
      [{ at: now(), event: 'failed', step, error: failure.error }], { event: 'failed', whatsappId: signup.wabaId, currentStep: step, error: failure.error });
    throw new StepError(failure.status, step, `The WhatsApp setup failed at step ${step}: ${failure.error}`);
  } finally {
    await graph?.close();
  }
}

async function log(deps: OnboardingDeps, signup: Signup, entry: LogEntry): Promise<void> {
  await recordStep(deps, signup, {}, [entry], null);
}

/** What a failed step tells the partner and the client: Graph's `[code] title`, our own words, never internals. */
function describe(err: unknown, step: string): { status: number; error: string } {
  if (err instanceof StepError) return { status: err.status, error: err.message };
  if (err instanceof GraphError) return { status: 502, error: err.info };
  if (err instanceof OnboardingUnavailableError) return { status: 503, error: err.message };
  return { status: 500, error: `internal error during ${step}` };
}
