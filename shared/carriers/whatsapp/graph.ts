/**
 * A thin client of Meta's Graph API for the WhatsApp connector: the send call (answering a
 * carrier-neutral SendOutcome) and the management calls of onboarding and the D7 lists
 * (answering typed data or throwing GraphError). Tokens and the app secret travel only in the
 * request (a header, or the query of the code exchange where Graph wants them) and never appear
 * in an error message.
 */
import { CarrierHttpClient, CarrierHttpError, type CarrierHttpOptions, type CarrierHttpResponse } from '../http-client.js';
import type { SendOutcome } from '../http-carrier.js';
import { errorInfo, graphErrorClass, graphErrorOutcome, readGraphError, uncodedClass, uncodedTitle, type GraphErrorClass } from './errors.js';
import type { GraphPhoneNumber, GraphSendBody, GraphTemplate, GraphWaba } from './types.js';

export const DEFAULT_GRAPH_URL = 'https://graph.facebook.com';
export const DEFAULT_GRAPH_VERSION = 'v25.0';

export interface GraphClientOptions {
  /** Graph's origin (and optional path prefix); default Meta's. Tests point it at the simulator. */
  baseUrl?: string;
  /** `vNN.N`; default v25.0. */
  version?: string;
  http?: CarrierHttpOptions;
}

/** A management call Graph refused (or could not be reached for: code 0, class retry). */
export class GraphError extends Error {
  override name = 'GraphError';
  /** Meta's numeric error code; 0 when there was none (network failure, a bare HTTP error). */
  readonly code: number;
  readonly title: string;
  /** HTTP status of the answer; 0 when there was none. */
  readonly httpStatus: number;
  readonly cls: GraphErrorClass;
  constructor(code: number, title: string, httpStatus: number, cls?: GraphErrorClass) {
    super(errorInfo(code, title));
    this.code = code;
    this.title = title;
    this.httpStatus = httpStatus;
    this.cls = cls ?? graphErrorClass(code);
  }
  /** `[<code>] <title>`. */
  get info(): string {
    return this.message;
  }
}

/** Fields asked for by default in the D7 lists and the template cache. */
export const PHONE_NUMBER_FIELDS = 'id,display_phone_number,verified_name,code_verification_status,quality_rating,status,platform_type,name_status,messaging_limit_tier,account_mode,throughput';
export const TEMPLATE_FIELDS = 'id,name,language,status,category,parameter_format,components';
export const WABA_FIELDS = 'id,name,currency,timezone_id,country,message_template_namespace,owner_business_info,account_review_status,business_verification_status,ownership_type';

/** Pages followed at most by a list call (a guard against a cursor that never ends). */
const MAX_PAGES = 200;

interface Page<T> {
  data: T[];
  after?: string;
  hasNext: boolean;
}

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

function seg(id: string): string {
  return encodeURIComponent(id);
}

export class GraphClient {
  readonly version: string;
  private readonly http: CarrierHttpClient;

  constructor(opts: GraphClientOptions = {}) {
    const version = opts.version ?? DEFAULT_GRAPH_VERSION;
    if (!/^v\d+\.\d+$/.test(version)) throw new Error(`Graph version must look like v25.0, not ${JSON.stringify(version)}`);
    this.version = version;
    this.http = new CarrierHttpClient(opts.baseUrl ?? DEFAULT_GRAPH_URL, opts.http);
  }

  close(): Promise<void> {
    return this.http.close();
  }

  /** `POST /{v}/{phone-number-id}/messages`. Never throws: network failures and timeouts are `retry` with code 0. */
  async sendMessage(phoneNumberId: string, token: string, body: GraphSendBody): Promise<SendOutcome> {
    let res: CarrierHttpResponse;
    try {
      res = await this.http.request('POST', `/${this.version}/${seg(phoneNumberId)}/messages`, { headers: bearer(token), json: body });
    } catch (err) {
      // No answer: no code of Meta's to give (`[0]` reads as success in the spec's pattern), only the fault.
      if (err instanceof CarrierHttpError) return { kind: 'retry', code: 0, info: err.message };
      throw err;
    }
    if (res.status >= 200 && res.status < 300) {
      const id = messageId(res.body);
      if (id) return { kind: 'accepted', carrierRef: id };
      return { kind: 'failed', code: 0, info: `Graph answered HTTP ${res.status} without a message id`, config: false };
    }
    return graphErrorOutcome(res.status, res.body);
  }

  /** The WABA's phone numbers, all pages. */
  listPhoneNumbers(wabaId: string, token: string, fields: string = PHONE_NUMBER_FIELDS): Promise<GraphPhoneNumber[]> {
    return this.all<GraphPhoneNumber>(`/${seg(wabaId)}/phone_numbers`, token, { fields, limit: '100' });
  }

  /** The WABA's message templates, all pages (following `paging.cursors.after`). */
  listTemplates(wabaId: string, token: string, fields: string = TEMPLATE_FIELDS): Promise<GraphTemplate[]> {
    return this.all<GraphTemplate>(`/${seg(wabaId)}/message_templates`, token, { fields, limit: '100' });
  }

  /** The WABAs a business portfolio shares with us (`client_whatsapp_business_accounts`), all pages. */
  listClientWabas(businessId: string, token: string, fields = 'id,name,currency,country,owner_business_info'): Promise<GraphWaba[]> {
    return this.all<GraphWaba>(`/${seg(businessId)}/client_whatsapp_business_accounts`, token, { fields, limit: '100' });
  }

  async getWaba(wabaId: string, token: string, fields: string = WABA_FIELDS): Promise<GraphWaba> {
    const body = await this.call('GET', `/${seg(wabaId)}`, { headers: bearer(token), query: { fields } });
    if (!isObj(body) || typeof body.id !== 'string') throw new GraphError(0, 'Graph answered without a WABA id', 200, 'request');
    return body as unknown as GraphWaba;
  }

  /**
   * Embedded Signup's code → business token (`GET /{v}/oauth/access_token`). Graph takes the app
   * secret and the code in the query; they are not logged here and not part of any error.
   */
  async exchangeCode(appId: string, appSecret: string, code: string): Promise<{ accessToken: string; expiresIn?: number }> {
    const body = await this.call('GET', '/oauth/access_token', { query: { client_id: appId, client_secret: appSecret, code } });
    if (!isObj(body) || typeof body.access_token !== 'string' || body.access_token === '') {
      throw new GraphError(0, 'Graph answered without an access token', 200, 'request');
    }
    const out: { accessToken: string; expiresIn?: number } = { accessToken: body.access_token };
    if (typeof body.expires_in === 'number') out.expiresIn = body.expires_in;
    return out;
  }

  /** `POST /{v}/{waba-id}/subscribed_apps`: our app gets the WABA's webhooks (optionally at a per-WABA URL). */
  async subscribeApp(wabaId: string, token: string, override?: { callbackUri: string; verifyToken: string }): Promise<void> {
    const json = override ? { override_callback_uri: override.callbackUri, verify_token: override.verifyToken } : {};
    this.expectSuccess(await this.call('POST', `/${seg(wabaId)}/subscribed_apps`, { headers: bearer(token), json }));
  }

  /** `POST /{v}/{phone-number-id}/register` with the number's 6-digit two-step PIN. */
  async registerNumber(phoneNumberId: string, token: string, pin: string): Promise<void> {
    const json = { messaging_product: 'whatsapp', pin };
    this.expectSuccess(await this.call('POST', `/${seg(phoneNumberId)}/register`, { headers: bearer(token), json }));
  }

  private expectSuccess(body: unknown): void {
    if (!isObj(body) || body.success !== true) throw new GraphError(0, 'Graph did not answer success', 200, 'request');
  }

  private async all<T>(path: string, token: string, query: Record<string, string>): Promise<T[]> {
    const out: T[] = [];
    let after: string | undefined;
    for (let i = 0; i < MAX_PAGES; i++) {
      const page = await this.page<T>(path, token, after === undefined ? query : { ...query, after });
      out.push(...page.data);
      if (!page.hasNext || page.after === undefined || page.after === after || page.data.length === 0) return out;
      after = page.after;
    }
    throw new GraphError(0, `more than ${MAX_PAGES} pages`, 200, 'request');
  }

  private async page<T>(path: string, token: string, query: Record<string, string>): Promise<Page<T>> {
    const body = await this.call('GET', path, { headers: bearer(token), query });
    if (!isObj(body) || !Array.isArray(body.data)) throw new GraphError(0, 'Graph answered without a data list', 200, 'request');
    const paging = isObj(body.paging) ? body.paging : {};
    const cursors = isObj(paging.cursors) ? paging.cursors : {};
    const page: Page<T> = { data: body.data as T[], hasNext: typeof paging.next === 'string' };
    if (typeof cursors.after === 'string') page.after = cursors.after;
    return page;
  }

  private async call(method: 'GET' | 'POST', path: string, opts: { query?: Record<string, string>; headers?: Record<string, string>; json?: unknown }): Promise<unknown> {
    let res: CarrierHttpResponse;
    try {
      res = await this.http.request(method, `/${this.version}${path}`, opts);
    } catch (err) {
      if (err instanceof CarrierHttpError) throw new GraphError(0, err.message, 0, 'retry');
      throw err;
    }
    if (res.status >= 200 && res.status < 300) return res.body;
    const fields = readGraphError(res.body);
    if (fields?.code !== undefined) throw new GraphError(fields.code, fields.title, res.status);
    throw new GraphError(0, uncodedTitle(res.status, fields), res.status, uncodedClass(res.status));
  }
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function messageId(body: unknown): string | undefined {
  if (!isObj(body) || !Array.isArray(body.messages)) return undefined;
  const first: unknown = body.messages[0];
  return isObj(first) && typeof first.id === 'string' && first.id !== '' ? first.id : undefined;
}
