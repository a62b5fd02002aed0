/**
 * The D7 lists: an account's WABAs, a WABA's phone numbers and templates, read from what
 * onboarding stored, or (`refresh: true`) read again from Graph with the WABA's stored business
 * token and stored before answering. A WABA the calling key's account does not hold is 404, whoever
 * else holds it.
 */
import { withTx } from '../../db/pool.js';
import type { ApiKeyRecord } from '../../domain/keys.js';
import { AppError, notFound } from '../../errors.js';
import { GraphClient, GraphError } from '../../carriers/whatsapp/graph.js';
import { OnboardingUnavailableError, connectionByName } from './connection.js';
import { parseListBody } from './input.js';
import { unavailable, type OnboardingDeps } from './signup.js';
import {
  listNumbers, listTemplates, listWabas, replaceNumbers, replaceTemplates, updateWabaFields, wabaToken,
  type StoredNumber, type StoredTemplate, type StoredWaba,
} from './store.js';

export interface AccountView {
  client_id: string;
  whatsapp_name: string | null;
  whatsapp_id: string;
  whatsapp_currency: string | null;
  whatsapp_owner_name: string | null;
  whatsapp_owner_id: string | null;
  country: string | null;
}

export interface NumberView {
  phone_number: string | null;
  phone_number_id: string;
  status: string | null;
}

export interface TemplateView {
  template_name: string;
  language: string;
  status: string | null;
  category: string | null;
}

/** D7 mapping (channels.md 1.8): `client_id` is the partner's `partner_client_id` of the signup. */
export function accountView(w: StoredWaba): AccountView {
  return {
    client_id: w.partnerClientId, whatsapp_name: w.name, whatsapp_id: w.wabaId, whatsapp_currency: w.currency,
    whatsapp_owner_name: w.ownerName, whatsapp_owner_id: w.ownerId, country: w.country,
  };
}

/** `phone_number`: the display number's digits (`+420 777 123 456` → `420777123456`). */
export function numberView(n: StoredNumber): NumberView {
  const digits = n.displayPhoneNumber?.replace(/\D/g, '') ?? '';
  return { phone_number: digits === '' ? null : digits, phone_number_id: n.phoneNumberId, status: n.status };
}

export function templateView(t: StoredTemplate): TemplateView {
  return { template_name: t.name, language: t.language, status: t.status, category: t.category };
}

type Kind = 'accounts' | 'numbers' | 'templates';

/** Reads the WABA again from Graph (the parts `kind` lists) and stores what it says. */
async function refresh(deps: OnboardingDeps, accountId: number, wabaId: string, kind: Kind): Promise<void> {
  const stored = await wabaToken(deps.db, deps.box, accountId, wabaId);
  if (!stored) throw notFound(`waba_id: ${wabaId} is not a WhatsApp Business Account of this account`);
  let graph: GraphClient | null = null;
  try {
    const connection = await connectionByName(deps.db, deps.box, stored.connection);
    graph = new GraphClient({ baseUrl: connection.graphUrl, version: connection.graphVersion, http: { connections: 2, timeoutMs: 20_000 } });
    const waba = kind === 'accounts' ? await graph.getWaba(wabaId, stored.token) : null;
    const numbers = kind === 'numbers' ? await graph.listPhoneNumbers(wabaId, stored.token) : null;
    const templates = kind === 'templates' ? await graph.listTemplates(wabaId, stored.token) : null;
    await withTx(deps.db, async (tx) => {
      if (waba) await updateWabaFields(tx, accountId, waba);
      if (numbers) await replaceNumbers(tx, accountId, wabaId, numbers, new Set());
      if (templates) await replaceTemplates(tx, accountId, wabaId, templates);
    });
  } catch (err) {
    if (err instanceof GraphError) throw new AppError(502, 'GRAPH_REFUSED', `waba_id ${wabaId}: Graph refused the refresh: ${err.info}`);
    if (err instanceof OnboardingUnavailableError) throw unavailable(err);
    throw err;
  } finally {
    await graph?.close();
  }
}

async function ownedWaba(deps: OnboardingDeps, accountId: number, wabaId: string): Promise<void> {
  if ((await listWabas(deps.db, accountId, wabaId)).length === 0) {
    throw notFound(`waba_id: ${wabaId} is not a WhatsApp Business Account of this account`);
  }
}

export async function listAccounts(deps: OnboardingDeps, key: ApiKeyRecord, body: unknown): Promise<AccountView[]> {
  const input = parseListBody(body, false);
  const wabas = await listWabas(deps.db, key.accountId, input.waba_id);
  if (input.waba_id !== null && wabas.length === 0) throw notFound(`waba_id: ${input.waba_id} is not a WhatsApp Business Account of this account`);
  if (!input.refresh) return wabas.map(accountView);
  for (const w of wabas) await refresh(deps, key.accountId, w.wabaId, 'accounts');
  return (await listWabas(deps.db, key.accountId, input.waba_id)).map(accountView);
}

export async function listPhoneNumbers(deps: OnboardingDeps, key: ApiKeyRecord, body: unknown): Promise<NumberView[]> {
  const { waba_id: wabaId, refresh: again } = parseListBody(body, true);
  await ownedWaba(deps, key.accountId, wabaId!);
  if (again) await refresh(deps, key.accountId, wabaId!, 'numbers');
  return (await listNumbers(deps.db, key.accountId, wabaId!)).map(numberView);
}

export async function listWabaTemplates(deps: OnboardingDeps, key: ApiKeyRecord, body: unknown): Promise<TemplateView[]> {
  const { waba_id: wabaId, refresh: again } = parseListBody(body, true);
  await ownedWaba(deps, key.accountId, wabaId!);
  if (again) await refresh(deps, key.accountId, wabaId!, 'templates');
  return (await listTemplates(deps.db, key.accountId, wabaId!)).map(templateView);
}
