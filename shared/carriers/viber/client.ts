/**
 * Sends Viber messages with one connection's dialect over a keep-alive HTTP client and turns
 * every answer into a SendOutcome. Network failures and timeouts are retryable (the carrier may
 * not have seen the request); input the dialect cannot send is a configuration failure.
 */
import type { CallbackEvent, SendOutcome } from '../http-carrier.js';
import { CarrierHttpClient, CarrierHttpError, type CarrierHttpOptions } from '../http-client.js';
import { OFFICIAL_DEFAULT_BASE_URL, officialAdapter } from './official.js';
import { PARTNER_DEFAULT_BASE_URL, buildPartnerStatusQuery, parsePartnerStatus, partnerAdapter } from './partner.js';
import { ViberInputError, type ViberAdapter, type ViberDialect, type ViberSendInput } from './types.js';

export const VIBER_ADAPTERS: Readonly<Record<ViberDialect, ViberAdapter>> = {
  official: officialAdapter,
  partner: partnerAdapter,
};

export interface ViberClientOptions extends CarrierHttpOptions {
  dialect: ViberDialect;
  /** Default: the dialect's public host. */
  baseUrl?: string;
  /** Partner: the API key, used when a send brings none. */
  apiKey?: string;
  /** Partner: the callback URL sent with every message (the connection's URL with its token), when a send brings none. */
  callbackUrl?: string;
}

export class ViberClient {
  readonly dialect: ViberDialect;
  readonly adapter: ViberAdapter;
  private readonly http: CarrierHttpClient;

  constructor(private readonly opts: ViberClientOptions) {
    this.dialect = opts.dialect;
    this.adapter = VIBER_ADAPTERS[opts.dialect];
    const base = opts.baseUrl ?? (opts.dialect === 'official' ? OFFICIAL_DEFAULT_BASE_URL : PARTNER_DEFAULT_BASE_URL);
    this.http = new CarrierHttpClient(base, opts);
  }

  async send(input: ViberSendInput): Promise<SendOutcome> {
    let request;
    try {
      request = this.adapter.buildSend({
        ...input,
        credentials: input.credentials ?? (this.opts.apiKey ? { apiKey: this.opts.apiKey } : undefined),
        callbackUrl: input.callbackUrl ?? this.opts.callbackUrl,
      });
    } catch (err) {
      // A fault with no Viber status code is text alone (spec: both parts optional); `[0]` reads as success.
      if (err instanceof ViberInputError) return { kind: 'failed', code: 0, info: err.message, config: true };
      throw err;
    }
    try {
      const res = await this.http.request(request.method, request.path, { headers: request.headers, json: request.json });
      return this.adapter.parseSendResponse(res.status, res.body, res.headers);
    } catch (err) {
      if (err instanceof CarrierHttpError) return { kind: 'retry', code: 0, info: `${err.code ?? 'NETWORK'}: ${err.message}` };
      throw err;
    }
  }

  /**
   * Partner only: the current status of one message (`receive-viber`), for a step whose callbacks
   * did not come. Null when there is no news (pending, unknown) or the poll failed.
   */
  async pollStatus(carrierRef: string): Promise<CallbackEvent | null> {
    if (this.dialect !== 'partner') return null;
    const apiKey = this.opts.apiKey;
    let res;
    try {
      const q = buildPartnerStatusQuery(carrierRef, apiKey ? { apiKey } : undefined);
      res = await this.http.request(q.method, q.path, { headers: q.headers, json: q.json });
    } catch (err) {
      if (err instanceof CarrierHttpError || err instanceof ViberInputError) return null;
      throw err;
    }
    const event = parsePartnerStatus(res.status, res.body);
    return event === null || 'error' in event ? null : event;
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
