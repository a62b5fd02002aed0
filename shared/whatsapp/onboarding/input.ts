/**
 * Checks of the partner onboarding API's bodies (D7). Pure: every problem is collected and the
 * 400 names each field (`partner_name: is required; country: must be ...`), so a partner fixes
 * everything at once; nothing that could make Postgres fail (NUL, overlong text) gets through.
 */
import { badRequest } from '../../errors.js';
import { checkCallbackUrl, MAX_CALLBACK_URL_LENGTH } from '../../net/ssrf.js';
import { isValidCountry } from '../../phone/normalize.js';
import { isPlainObject } from '../../rest/input.js';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const EMAIL_RE = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
/** Graph object ids are decimal digits; anything else cannot name a WABA. */
export const GRAPH_ID_RE = /^\d{1,30}$/;

export type PhoneNumberMode = 'manual' | 'automatic';

export interface SignupInput {
  partner_name: string;
  partner_logo: string | null;
  partner_callback_url: string;
  partner_client_id: string;
  partner_finish_url: string;
  phone_number: PhoneNumberMode;
  wa_name: string;
  wa_email: string;
  wa_website: string | null;
  country: string;
}

export const SIGNUP_FIELDS = [
  'partner_name', 'partner_logo', 'partner_callback_url', 'partner_client_id', 'partner_finish_url',
  'phone_number', 'wa_name', 'wa_email', 'wa_website', 'country',
] as const;
const OPTIONAL: ReadonlySet<string> = new Set(['partner_logo', 'wa_website']);

/** Collects `<field>: <problem>` texts and throws them as one 400. */
class Problems {
  readonly list: string[] = [];
  readonly fields: string[] = [];
  add(field: string, problem: string): void {
    this.list.push(`${field}: ${problem}`);
    this.fields.push(field);
  }
  throwIfAny(): void {
    if (this.list.length > 0) throw badRequest(this.list.join('; '), 'VALIDATION', { fields: this.fields });
  }
}

function text(p: Problems, field: string, v: unknown, max: number): string | undefined {
  if (typeof v !== 'string') {
    p.add(field, 'must be a string');
    return undefined;
  }
  const t = v.trim();
  if (t === '') p.add(field, 'must not be empty');
  else if (t.length > max) p.add(field, `must be at most ${max} characters`);
  else if (CONTROL.test(t)) p.add(field, 'must not contain control characters');
  else return t;
  return undefined;
}

/** An http(s) URL a browser goes to or loads (not a server-side fetch: no address policy). */
function browserUrl(p: Problems, field: string, v: unknown, httpsOnly: boolean): string | undefined {
  const t = text(p, field, v, MAX_CALLBACK_URL_LENGTH);
  if (t === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(t);
  } catch {
    p.add(field, 'must be an absolute http(s) URL');
    return undefined;
  }
  if (url.protocol !== 'https:' && (httpsOnly || url.protocol !== 'http:')) {
    p.add(field, httpsOnly ? 'must be an https URL' : 'must be an http(s) URL');
    return undefined;
  }
  if (/\s/.test(t)) {
    p.add(field, 'must not contain spaces');
    return undefined;
  }
  return t;
}

export interface SignupInputOptions {
  /** D4: private and loopback callback hosts are refused unless the operator allows them. */
  allowPrivateCallbacks: boolean;
  /** Production: the logo (shown on our page) and the finish URL must be https. */
  production: boolean;
}

/** Checks the body of `POST /v1/whatsapp/signup`; a 400 names every bad, missing or unknown field. */
export function parseSignup(body: unknown, opts: SignupInputOptions): SignupInput {
  if (!isPlainObject(body)) throw badRequest('body: must be a JSON object');
  const p = new Problems();
  for (const name of Object.keys(body)) {
    if (!(SIGNUP_FIELDS as readonly string[]).includes(name)) p.add(name, 'is not an allowed field');
  }
  const given = (name: string): boolean => body[name] !== undefined && !(OPTIONAL.has(name) && (body[name] === null || body[name] === ''));
  for (const name of SIGNUP_FIELDS) {
    if (!OPTIONAL.has(name) && body[name] === undefined) p.add(name, 'is required');
  }
  const out: Partial<SignupInput> = { partner_logo: null, wa_website: null };
  if (given('partner_name')) out.partner_name = text(p, 'partner_name', body.partner_name, 100);
  if (given('partner_logo')) out.partner_logo = browserUrl(p, 'partner_logo', body.partner_logo, opts.production) ?? null;
  if (given('partner_callback_url')) {
    const t = text(p, 'partner_callback_url', body.partner_callback_url, MAX_CALLBACK_URL_LENGTH);
    if (t !== undefined) {
      const policy = checkCallbackUrl(t, opts.allowPrivateCallbacks);
      if (!policy.ok) p.add('partner_callback_url', policy.reason);
      else if (/\s/.test(t)) p.add('partner_callback_url', 'URL must not contain spaces');
      else out.partner_callback_url = t;
    }
  }
  if (given('partner_client_id')) out.partner_client_id = text(p, 'partner_client_id', body.partner_client_id, 100);
  if (given('partner_finish_url')) out.partner_finish_url = browserUrl(p, 'partner_finish_url', body.partner_finish_url, opts.production);
  if (given('phone_number')) {
    if (body.phone_number === 'manual' || body.phone_number === 'automatic') out.phone_number = body.phone_number;
    else p.add('phone_number', 'must be "manual" or "automatic"');
  }
  if (given('wa_name')) out.wa_name = text(p, 'wa_name', body.wa_name, 100);
  if (given('wa_email')) {
    const t = text(p, 'wa_email', body.wa_email, 254);
    if (t !== undefined && !EMAIL_RE.test(t)) p.add('wa_email', 'must be an e-mail address');
    else out.wa_email = t;
  }
  if (given('wa_website')) out.wa_website = browserUrl(p, 'wa_website', body.wa_website, false) ?? null;
  if (given('country')) {
    if (typeof body.country === 'string' && isValidCountry(body.country.toUpperCase())) out.country = body.country.toUpperCase();
    else p.add('country', 'must be an ISO 3166-1 alpha-2 country code (e.g. "CZ")');
  }
  p.throwIfAny();
  return out as SignupInput;
}

export interface ListInput {
  waba_id: string | null;
  refresh: boolean;
}

/** The body of the three list calls: `{waba_id?, refresh?}`; `waba_id` required unless listing accounts. */
export function parseListBody(body: unknown, wabaRequired: boolean): ListInput {
  // An empty body is an empty object here: `accounts/list` takes none.
  const input = body === undefined ? {} : body;
  if (!isPlainObject(input)) throw badRequest('body: must be a JSON object');
  const p = new Problems();
  for (const name of Object.keys(input)) {
    if (name !== 'waba_id' && name !== 'refresh') p.add(name, 'is not an allowed field (allowed: waba_id, refresh)');
  }
  let wabaId: string | null = null;
  if (input.waba_id === undefined || input.waba_id === null || input.waba_id === '') {
    if (wabaRequired) p.add('waba_id', 'is required');
  } else if (typeof input.waba_id === 'string' && GRAPH_ID_RE.test(input.waba_id)) {
    wabaId = input.waba_id;
  } else if (typeof input.waba_id === 'number' && Number.isSafeInteger(input.waba_id) && input.waba_id > 0) {
    wabaId = String(input.waba_id);
  } else {
    p.add('waba_id', 'must be a WABA id (a string of digits)');
  }
  if (input.refresh !== undefined && typeof input.refresh !== 'boolean') p.add('refresh', 'must be true or false');
  p.throwIfAny();
  return { waba_id: wabaId, refresh: input.refresh === true };
}
