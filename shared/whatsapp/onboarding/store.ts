/**
 * Onboarding's tables (migration 017): signups with their session log, and per account the WABAs,
 * numbers and templates completed signups brought in. The business token and the numbers' PINs
 * are sealed with CREDENTIALS_KEY, each bound to its row, and opened only to call Graph.
 */
import type { Queryable } from '../../db/pool.js';
import type { SecretBox } from '../../secrets/sealed.js';
import type { GraphPhoneNumber, GraphTemplate, GraphWaba } from '../../carriers/whatsapp/types.js';
import type { PhoneNumberMode, SignupInput } from './input.js';

export type SignupStatus = 'created' | 'started' | 'completing' | 'completed' | 'cancelled' | 'failed';

export interface Signup {
  id: number;
  publicId: string;
  accountId: number;
  keyId: number;
  connection: string;
  status: SignupStatus;
  partnerName: string;
  partnerLogo: string | null;
  partnerCallbackUrl: string;
  partnerClientId: string;
  partnerFinishUrl: string;
  phoneNumber: PhoneNumberMode;
  waName: string;
  waEmail: string;
  waWebsite: string | null;
  country: string;
  currentStep: string | null;
  error: string | null;
  businessId: string | null;
  wabaId: string | null;
  phoneNumberIds: string[];
  expiresAt: Date;
  log: LogEntry[];
}

/** One line of a signup's session log. */
export interface LogEntry {
  at: string;
  event: string;
  [detail: string]: unknown;
}

/** Entries a signup's log keeps at most (a page replaying cancels cannot grow it without end). */
export const MAX_LOG_ENTRIES = 300;

interface SignupRow {
  id: number;
  public_id: string;
  account_id: number;
  key_id: number;
  connection: string;
  status: SignupStatus;
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
  current_step: string | null;
  error: string | null;
  business_id: string | null;
  waba_id: string | null;
  phone_number_ids: string[];
  expires_at: Date;
  log: LogEntry[];
}

function toSignup(r: SignupRow): Signup {
  return {
    id: Number(r.id), publicId: r.public_id, accountId: Number(r.account_id), keyId: Number(r.key_id), connection: r.connection, status: r.status,
    partnerName: r.partner_name, partnerLogo: r.partner_logo, partnerCallbackUrl: r.partner_callback_url, partnerClientId: r.partner_client_id,
    partnerFinishUrl: r.partner_finish_url, phoneNumber: r.phone_number, waName: r.wa_name, waEmail: r.wa_email, waWebsite: r.wa_website,
    country: r.country, currentStep: r.current_step, error: r.error, businessId: r.business_id, wabaId: r.waba_id,
    phoneNumberIds: r.phone_number_ids, expiresAt: r.expires_at, log: r.log,
  };
}

export async function insertSignup(
  db: Queryable, s: { publicId: string; accountId: number; keyId: number; connection: string; input: SignupInput; expiresAt: Date },
): Promise<void> {
  const i = s.input;
  await db.query(
    `INSERT INTO whatsapp_signups (public_id, account_id, key_id, connection, partner_name, partner_logo, partner_callback_url,
                                   partner_client_id, partner_finish_url, phone_number, wa_name, wa_email, wa_website, country, expires_at, log)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
    [s.publicId, s.accountId, s.keyId, s.connection, i.partner_name, i.partner_logo, i.partner_callback_url, i.partner_client_id,
      i.partner_finish_url, i.phone_number, i.wa_name, i.wa_email, i.wa_website, i.country, s.expiresAt,
      JSON.stringify([{ at: new Date().toISOString(), event: 'created' }])],
  );
}

export async function loadSignup(db: Queryable, publicId: string): Promise<Signup | null> {
  const { rows } = await db.query<SignupRow>('SELECT * FROM whatsapp_signups WHERE public_id = $1', [publicId]);
  return rows[0] ? toSignup(rows[0]) : null;
}

/** What a step changes on the signup besides its log. */
export interface SignupChange {
  status?: SignupStatus;
  currentStep?: string | null;
  error?: string | null;
  businessId?: string;
  wabaId?: string;
  phoneNumberIds?: string[];
}

/**
 * A signup left `completing` this long ago (its process died during the backend steps; each step
 * touches the row) is open again.
 */
export const STALE_COMPLETING_MS = 5 * 60_000;

/**
 * Which statuses a change may apply from: a list, or `open` (what a finish or cancel may start
 * from: created, started, cancelled, failed, or a stale `completing`).
 */
export type StatusGuard = SignupStatus[] | 'open';
const OPEN_STATUSES: SignupStatus[] = ['created', 'started', 'cancelled', 'failed'];

/**
 * Applies a change and appends log entries; with `from`, only while the signup's status passes the
 * guard (a claim). Returns false when it did not.
 */
export async function changeSignup(db: Queryable, id: number, change: SignupChange, entries: LogEntry[], from?: StatusGuard): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE whatsapp_signups SET
        status = COALESCE($2, status),
        current_step = CASE WHEN $3 THEN $4 ELSE current_step END,
        error = CASE WHEN $5 THEN $6 ELSE error END,
        business_id = COALESCE($7, business_id),
        waba_id = COALESCE($8, waba_id),
        phone_number_ids = COALESCE($9, phone_number_ids),
        completed_at = CASE WHEN $2 = 'completed' THEN now() ELSE completed_at END,
        log = CASE WHEN jsonb_array_length(log) + jsonb_array_length($10::jsonb) <= $12 THEN log || $10::jsonb ELSE log END,
        updated_at = now()
      WHERE id = $1 AND ($11::text[] IS NULL OR status = ANY($11)
                         OR ($13::float IS NOT NULL AND status = 'completing' AND updated_at < now() - make_interval(secs => $13::float / 1000)))`,
    [id, change.status ?? null, change.currentStep !== undefined, change.currentStep ?? null, change.error !== undefined, change.error ?? null,
      change.businessId ?? null, change.wabaId ?? null, change.phoneNumberIds ?? null, JSON.stringify(entries), from === 'open' ? OPEN_STATUSES : (from ?? null), MAX_LOG_ENTRIES,
      from === 'open' ? STALE_COMPLETING_MS : null],
  );
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------------------------
// WABAs, numbers, templates

const wabaAad = (accountId: number, wabaId: string): string => `whatsapp-waba:${accountId}:${wabaId}`;
const pinAad = (accountId: number, phoneNumberId: string): string => `whatsapp-pin:${accountId}:${phoneNumberId}`;

export interface StoredWaba {
  wabaId: string;
  connection: string;
  partnerClientId: string;
  businessId: string | null;
  name: string | null;
  currency: string | null;
  country: string | null;
  ownerName: string | null;
  ownerId: string | null;
}

export interface StoredNumber {
  phoneNumberId: string;
  displayPhoneNumber: string | null;
  verifiedName: string | null;
  status: string | null;
  registered: boolean;
}

export interface StoredTemplate {
  templateId: string;
  name: string;
  language: string;
  status: string | null;
  category: string | null;
}

/** Creates or updates an account's WABA with what Graph said of it (fields Graph left out stay) and its new business token. */
export async function saveWaba(
  db: Queryable, box: SecretBox,
  w: { accountId: number; waba: GraphWaba; signupId: number | null; connection: string; partnerClientId: string; businessId: string | null; country: string | null; token: string },
): Promise<void> {
  const sealed = box.seal({ access_token: w.token }, wabaAad(w.accountId, w.waba.id));
  await db.query(
    `INSERT INTO whatsapp_wabas (account_id, waba_id, signup_id, connection, partner_client_id, business_id, name, currency, country, timezone_id,
                                 owner_name, owner_id, credentials, subscribed, refreshed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, true, now())
     ON CONFLICT (account_id, waba_id) DO UPDATE SET signup_id = EXCLUDED.signup_id, connection = EXCLUDED.connection,
       partner_client_id = EXCLUDED.partner_client_id, business_id = COALESCE(EXCLUDED.business_id, whatsapp_wabas.business_id),
       name = COALESCE(EXCLUDED.name, whatsapp_wabas.name), currency = COALESCE(EXCLUDED.currency, whatsapp_wabas.currency),
       country = COALESCE(EXCLUDED.country, whatsapp_wabas.country), timezone_id = COALESCE(EXCLUDED.timezone_id, whatsapp_wabas.timezone_id),
       owner_name = COALESCE(EXCLUDED.owner_name, whatsapp_wabas.owner_name), owner_id = COALESCE(EXCLUDED.owner_id, whatsapp_wabas.owner_id),
       credentials = EXCLUDED.credentials, subscribed = true, refreshed_at = now()`,
    [w.accountId, w.waba.id, w.signupId, w.connection, w.partnerClientId, w.businessId ?? w.waba.owner_business_info?.id ?? null,
      w.waba.name ?? null, w.waba.currency ?? null, w.waba.country ?? w.country, w.waba.timezone_id ?? null,
      w.waba.owner_business_info?.name ?? null, w.waba.owner_business_info?.id ?? null, sealed],
  );
}

/** A refresh of the WABA's own fields (the token and the partner's fields stay). */
export async function updateWabaFields(db: Queryable, accountId: number, waba: GraphWaba): Promise<void> {
  await db.query(
    `UPDATE whatsapp_wabas SET name = $3, currency = $4, country = COALESCE($5, country), timezone_id = $6, owner_name = $7, owner_id = $8,
            refreshed_at = now()
      WHERE account_id = $1 AND waba_id = $2`,
    [accountId, waba.id, waba.name ?? null, waba.currency ?? null, waba.country ?? null, waba.timezone_id ?? null,
      waba.owner_business_info?.name ?? null, waba.owner_business_info?.id ?? null],
  );
}

/**
 * Keeps the PIN a number is about to be registered with, before Graph is asked: should a later
 * step fail, the next signup of the number registers it with the same PIN (a new one would be
 * refused, 133005). The WABA row must exist.
 */
export async function rememberPin(db: Queryable, box: SecretBox, accountId: number, wabaId: string, phoneNumberId: string, pin: string): Promise<void> {
  await db.query(
    `INSERT INTO whatsapp_waba_numbers (account_id, waba_id, phone_number_id, pin) VALUES ($1, $2, $3, $4)
     ON CONFLICT (account_id, waba_id, phone_number_id) DO UPDATE SET pin = EXCLUDED.pin`,
    [accountId, wabaId, phoneNumberId, box.seal({ pin }, pinAad(accountId, phoneNumberId))],
  );
}

/**
 * The WABA's numbers become exactly `numbers` (as Graph listed them); those in `registered` were
 * just registered by us. PINs stored before stay.
 */
export async function replaceNumbers(
  db: Queryable, accountId: number, wabaId: string, numbers: GraphPhoneNumber[], registered: ReadonlySet<string>,
): Promise<void> {
  const ids = numbers.map((n) => n.id);
  await db.query('DELETE FROM whatsapp_waba_numbers WHERE account_id = $1 AND waba_id = $2 AND NOT (phone_number_id = ANY($3))', [accountId, wabaId, ids]);
  for (const n of numbers) {
    await db.query(
      `INSERT INTO whatsapp_waba_numbers (account_id, waba_id, phone_number_id, display_phone_number, verified_name, status, quality_rating,
                                          code_verification_status, registered, refreshed_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
       ON CONFLICT (account_id, waba_id, phone_number_id) DO UPDATE SET display_phone_number = EXCLUDED.display_phone_number,
         verified_name = EXCLUDED.verified_name, status = EXCLUDED.status, quality_rating = EXCLUDED.quality_rating,
         code_verification_status = EXCLUDED.code_verification_status,
         registered = whatsapp_waba_numbers.registered OR EXCLUDED.registered, refreshed_at = now()`,
      [accountId, wabaId, n.id, n.display_phone_number ?? null, n.verified_name ?? null, n.status ?? null, n.quality_rating ?? null,
        n.code_verification_status ?? null, registered.has(n.id)],
    );
  }
}

/** The WABA's templates become exactly `templates` (as Graph listed them). */
export async function replaceTemplates(db: Queryable, accountId: number, wabaId: string, templates: GraphTemplate[]): Promise<void> {
  await db.query('DELETE FROM whatsapp_waba_templates WHERE account_id = $1 AND waba_id = $2', [accountId, wabaId]);
  // Graph ids are unique per WABA; a template without one (a seed or a proxy that drops it) is keyed by name and language.
  const seen = new Set<string>();
  const rows = templates.map((t) => ({ ...t, key: t.id ?? `${t.name}:${t.language}` })).filter((t) => !seen.has(t.key) && seen.add(t.key));
  if (rows.length === 0) return;
  await db.query(
    `INSERT INTO whatsapp_waba_templates (account_id, waba_id, template_id, name, language, status, category, parameter_format, components)
     SELECT $1, $2, u.id, u.name, u.language, u.status, u.category, u.format, u.components::jsonb
       FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[]) AS u(id, name, language, status, category, format, components)`,
    [accountId, wabaId, rows.map((t) => t.key), rows.map((t) => t.name), rows.map((t) => t.language), rows.map((t) => t.status ?? null),
      rows.map((t) => t.category ?? null), rows.map((t) => t.parameter_format ?? null), rows.map((t) => JSON.stringify(t.components ?? []))],
  );
}

interface WabaRow {
  waba_id: string;
  connection: string;
  partner_client_id: string;
  business_id: string | null;
  name: string | null;
  currency: string | null;
  country: string | null;
  owner_name: string | null;
  owner_id: string | null;
}

const toWaba = (r: WabaRow): StoredWaba => ({
  wabaId: r.waba_id, connection: r.connection, partnerClientId: r.partner_client_id, businessId: r.business_id, name: r.name,
  currency: r.currency, country: r.country, ownerName: r.owner_name, ownerId: r.owner_id,
});

/** The account's WABAs (one when `wabaId` is given), oldest first. */
export async function listWabas(db: Queryable, accountId: number, wabaId: string | null): Promise<StoredWaba[]> {
  const { rows } = await db.query<WabaRow>(
    `SELECT waba_id, connection, partner_client_id, business_id, name, currency, country, owner_name, owner_id
       FROM whatsapp_wabas WHERE account_id = $1 AND ($2::text IS NULL OR waba_id = $2) ORDER BY created_at, id`,
    [accountId, wabaId],
  );
  return rows.map(toWaba);
}

/** The business token of the account's WABA, or null when the account holds no such WABA. */
export async function wabaToken(db: Queryable, box: SecretBox, accountId: number, wabaId: string): Promise<{ token: string; connection: string } | null> {
  const { rows } = await db.query<{ credentials: Buffer; connection: string }>(
    'SELECT credentials, connection FROM whatsapp_wabas WHERE account_id = $1 AND waba_id = $2', [accountId, wabaId]);
  const row = rows[0];
  if (!row) return null;
  const token = box.open(row.credentials, wabaAad(accountId, wabaId)).access_token;
  if (!token) throw new Error(`the stored token of WABA ${wabaId} is empty`);
  return { token, connection: row.connection };
}

/** The PIN this account registered the number with before, if any. */
export async function storedPin(db: Queryable, box: SecretBox, accountId: number, phoneNumberId: string): Promise<string | null> {
  const { rows } = await db.query<{ pin: Buffer }>(
    'SELECT pin FROM whatsapp_waba_numbers WHERE account_id = $1 AND phone_number_id = $2 AND pin IS NOT NULL LIMIT 1', [accountId, phoneNumberId]);
  return rows[0] ? (box.open(rows[0].pin, pinAad(accountId, phoneNumberId)).pin ?? null) : null;
}

export async function listNumbers(db: Queryable, accountId: number, wabaId: string): Promise<StoredNumber[]> {
  const { rows } = await db.query<{ phone_number_id: string; display_phone_number: string | null; verified_name: string | null; status: string | null; registered: boolean }>(
    `SELECT phone_number_id, display_phone_number, verified_name, status, registered FROM whatsapp_waba_numbers
      WHERE account_id = $1 AND waba_id = $2 ORDER BY phone_number_id`,
    [accountId, wabaId],
  );
  return rows.map((r) => ({ phoneNumberId: r.phone_number_id, displayPhoneNumber: r.display_phone_number, verifiedName: r.verified_name, status: r.status, registered: r.registered }));
}

export async function listTemplates(db: Queryable, accountId: number, wabaId: string): Promise<StoredTemplate[]> {
  const { rows } = await db.query<{ template_id: string; name: string; language: string; status: string | null; category: string | null }>(
    `SELECT template_id, name, language, status, category FROM whatsapp_waba_templates
      WHERE account_id = $1 AND waba_id = $2 ORDER BY name, language`,
    [accountId, wabaId],
  );
  return rows.map((r) => ({ templateId: r.template_id, name: r.name, language: r.language, status: r.status, category: r.category }));
}
