/**
 * What the WhatsApp Graph simulator knows at start: the Meta app, business portfolios, WABAs,
 * phone numbers, templates and access tokens. A JSON file of this shape can replace the built-in
 * default (`--seed <file>`); `checkSeed` says what is wrong with one.
 */
import { readFileSync } from 'node:fs';
import type { GraphTemplate } from '../../../shared/carriers/whatsapp/types.js';

export interface SeedApp {
  id: string;
  secret: string;
  verify_token: string;
  name?: string;
}

export interface SeedBusiness {
  id: string;
  name: string;
}

export interface SeedWaba {
  id: string;
  name: string;
  currency: string;
  country?: string;
  timezone_id?: string;
  /** The business portfolio that owns the WABA (a SeedBusiness id). */
  owner_business_id: string;
  message_template_namespace?: string;
  /** Listed in `client_whatsapp_business_accounts` from the start (else only once a signup exchanged its code). */
  shared?: boolean;
}

export interface SeedNumber {
  id: string;
  waba_id: string;
  display_phone_number: string;
  verified_name: string;
  /** CONNECTED, PENDING, FLAGGED, …; a registration makes it CONNECTED. */
  status?: string;
  quality_rating?: string;
  code_verification_status?: string;
  /** The two-step PIN of a number already registered; absent: not registered (sends answer 133010). */
  pin?: string;
}

export interface SeedTemplate extends GraphTemplate {
  waba_id: string;
  id: string;
}

export interface SeedToken {
  token: string;
  /** WABAs the token may manage and send for. */
  wabas: string[];
}

export interface WhatsappSeed {
  app: SeedApp;
  businesses: SeedBusiness[];
  wabas: SeedWaba[];
  numbers: SeedNumber[];
  templates: SeedTemplate[];
  tokens: SeedToken[];
  /** What the Embedded Signup stand-in reports as the client's choice (ids from the lists above). */
  signup: { waba_id: string; phone_number_id: string; business_id: string };
}

const WABA = '102290129340398';
const CLIENT_WABA = '104996122399160';
const BUSINESS = '506914307656634';
const CLIENT_BUSINESS = '608114524811503';

function tpl(id: string, name: string, language: string, category: string, status: string, components: GraphTemplate['components'], named = false): SeedTemplate {
  return { waba_id: WABA, id, name, language, category, status, parameter_format: named ? 'NAMED' : 'POSITIONAL', components };
}

/** The built-in seed: our own WABA with a registered number and templates, and a client WABA that Embedded Signup hands over. */
export const DEFAULT_SEED: WhatsappSeed = {
  app: { id: '1311457026571822', secret: 'sim-app-secret-8c1e0b6f', verify_token: 'sim-verify-token', name: 'Switchboard (simulated)' },
  businesses: [
    { id: BUSINESS, name: 'Switchboard Demo s.r.o.' },
    { id: CLIENT_BUSINESS, name: 'Client Shop a.s.' },
  ],
  wabas: [
    { id: WABA, name: 'Switchboard Demo', currency: 'EUR', country: 'CZ', timezone_id: '1', owner_business_id: BUSINESS, message_template_namespace: 'c7d1f2a4_5b6e_4c3d_9e8f_0a1b2c3d4e5f' },
    { id: CLIENT_WABA, name: 'Client Shop', currency: 'CZK', country: 'CZ', timezone_id: '1', owner_business_id: CLIENT_BUSINESS },
  ],
  numbers: [
    { id: '106540352242922', waba_id: WABA, display_phone_number: '+420 601 000 001', verified_name: 'Switchboard Demo', status: 'CONNECTED', quality_rating: 'GREEN', code_verification_status: 'VERIFIED', pin: '000000' },
    { id: '106540352242923', waba_id: WABA, display_phone_number: '+420 601 000 002', verified_name: 'Switchboard Demo', status: 'CONNECTED', quality_rating: 'YELLOW', code_verification_status: 'VERIFIED', pin: '000000' },
    { id: '107712830044115', waba_id: CLIENT_WABA, display_phone_number: '+420 777 123 456', verified_name: 'Client Shop', status: 'PENDING', quality_rating: 'UNKNOWN', code_verification_status: 'VERIFIED' },
  ],
  templates: [
    tpl('1001', 'hello_world', 'en_US', 'UTILITY', 'APPROVED', [
      { type: 'HEADER', format: 'TEXT', text: 'Hello World' },
      { type: 'BODY', text: 'Welcome and congratulations!! This message demonstrates your ability to send a WhatsApp message notification.' },
      { type: 'FOOTER', text: 'WhatsApp Business Platform sample message' },
    ]),
    tpl('1002', 'order_update', 'en_US', 'UTILITY', 'APPROVED', [
      { type: 'HEADER', format: 'TEXT', text: 'Order {{1}}', example: { header_text: ['A-1001'] } },
      { type: 'BODY', text: 'Hi {{1}}, your order {{2}} is on its way.', example: { body_text: [['Jana', 'A-1001']] } },
      { type: 'BUTTONS', buttons: [{ type: 'URL', text: 'Track', url: 'https://shop.example/track/{{1}}', example: ['https://shop.example/track/A-1001'] }, { type: 'QUICK_REPLY', text: 'Stop updates' }] },
    ]),
    tpl('1003', 'order_update', 'cs', 'UTILITY', 'APPROVED', [
      { type: 'HEADER', format: 'TEXT', text: 'Objednávka {{1}}' },
      { type: 'BODY', text: 'Dobrý den {{1}}, objednávka {{2}} je na cestě.' },
      { type: 'BUTTONS', buttons: [{ type: 'URL', text: 'Sledovat', url: 'https://shop.example/track/{{1}}' }, { type: 'QUICK_REPLY', text: 'Nechci zprávy' }] },
    ]),
    tpl('1004', 'promo_image', 'en_US', 'MARKETING', 'APPROVED', [
      { type: 'HEADER', format: 'IMAGE', example: { header_handle: ['https://shop.example/banner.jpg'] } },
      { type: 'BODY', text: 'New in store: {{1}}' },
    ]),
    tpl('1005', 'invoice_ready', 'en_US', 'UTILITY', 'APPROVED', [
      { type: 'HEADER', format: 'DOCUMENT' },
      { type: 'BODY', text: 'Your invoice {{1}} is attached.' },
    ]),
    tpl('1006', 'verify_code', 'en_US', 'AUTHENTICATION', 'APPROVED', [
      { type: 'BODY', text: '*{{1}}* is your verification code.' },
      { type: 'BUTTONS', buttons: [{ type: 'OTP', text: 'Copy code' }] },
    ]),
    tpl('1007', 'coupon_offer', 'en_US', 'MARKETING', 'APPROVED', [
      { type: 'BODY', text: 'Take {{1}} off your next order.' },
      { type: 'BUTTONS', buttons: [{ type: 'COPY_CODE', example: ['SAVE10'] }] },
    ]),
    tpl('1008', 'named_greeting', 'en_US', 'UTILITY', 'APPROVED', [
      { type: 'HEADER', format: 'TEXT', text: 'For {{customer}}', example: { header_text_named_params: [{ param_name: 'customer', example: 'Jana' }] } },
      { type: 'BODY', text: 'Hello {{first_name}}, your table for {{guests}} is booked.', example: { body_text_named_params: [{ param_name: 'first_name', example: 'Jana' }, { param_name: 'guests', example: '4' }] } },
    ], true),
    tpl('1009', 'summer_sale', 'en_US', 'MARKETING', 'PAUSED', [{ type: 'BODY', text: 'Summer sale: {{1}}' }]),
    tpl('1010', 'old_terms', 'en_US', 'UTILITY', 'DISABLED', [{ type: 'BODY', text: 'Our terms changed.' }]),
    tpl('1011', 'draft_notice', 'en_US', 'UTILITY', 'PENDING', [{ type: 'BODY', text: 'Draft {{1}}' }]),
    { waba_id: CLIENT_WABA, id: '2001', name: 'client_welcome', language: 'cs', category: 'MARKETING', status: 'APPROVED', parameter_format: 'POSITIONAL', components: [{ type: 'BODY', text: 'Vítejte, {{1}}!' }] },
  ],
  tokens: [
    { token: 'sim-system-user-token', wabas: [WABA] },
    { token: 'sim-client-system-token', wabas: [CLIENT_WABA] },
  ],
  signup: { waba_id: CLIENT_WABA, phone_number_id: '107712830044115', business_id: CLIENT_BUSINESS },
};

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Problems with a seed (empty when it is usable); each names the field. */
export function checkSeed(seed: unknown): string[] {
  const errors: string[] = [];
  if (!isObj(seed)) return ['seed is not a JSON object'];
  const str = (o: Obj, key: string, path: string): void => {
    if (typeof o[key] !== 'string' || o[key] === '') errors.push(`${path}.${key} must be a non-empty string`);
  };
  const list = (key: string, fields: string[]): Obj[] => {
    const v = seed[key];
    if (!Array.isArray(v)) {
      errors.push(`${key} must be an array`);
      return [];
    }
    return v.flatMap((item, i) => {
      if (!isObj(item)) {
        errors.push(`${key}[${i}] must be an object`);
        return [];
      }
      for (const f of fields) str(item, f, `${key}[${i}]`);
      return [item];
    });
  };
  if (!isObj(seed.app)) errors.push('app must be an object');
  else for (const f of ['id', 'secret', 'verify_token']) str(seed.app, f, 'app');
  const businesses = new Set(list('businesses', ['id', 'name']).map((b) => b.id));
  const wabas = new Set(list('wabas', ['id', 'name', 'currency', 'owner_business_id']).map((w) => w.id));
  const numbers = new Set<unknown>();
  list('numbers', ['id', 'waba_id', 'display_phone_number', 'verified_name']).forEach((n, i) => {
    numbers.add(n.id);
    if (!wabas.has(n.waba_id)) errors.push(`numbers[${i}].waba_id names no WABA`);
    if (n.pin !== undefined && !(typeof n.pin === 'string' && /^\d{6}$/.test(n.pin))) errors.push(`numbers[${i}].pin must be 6 digits`);
  });
  list('templates', ['id', 'waba_id', 'name', 'language']).forEach((t, i) => {
    if (!wabas.has(t.waba_id)) errors.push(`templates[${i}].waba_id names no WABA`);
    if (t.components !== undefined && !Array.isArray(t.components)) errors.push(`templates[${i}].components must be an array`);
  });
  list('tokens', ['token']).forEach((t, i) => {
    if (!Array.isArray(t.wabas) || t.wabas.some((w) => !wabas.has(w))) errors.push(`tokens[${i}].wabas must list known WABA ids`);
  });
  if (!isObj(seed.signup)) errors.push('signup must be an object');
  else {
    if (!wabas.has(seed.signup.waba_id)) errors.push('signup.waba_id names no WABA');
    if (!numbers.has(seed.signup.phone_number_id)) errors.push('signup.phone_number_id names no number');
    if (!businesses.has(seed.signup.business_id)) errors.push('signup.business_id names no business');
  }
  return errors;
}

/** Reads and checks a seed file; throws an Error listing every problem. */
export function loadSeed(path: string): WhatsappSeed {
  const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
  const errors = checkSeed(parsed);
  if (errors.length > 0) throw new Error(`seed ${path}: ${errors.join('; ')}`);
  return parsed as WhatsappSeed;
}
