/**
 * The Graph endpoints the WhatsApp simulator answers (channels.md 3.1), as Meta shapes them:
 * sending (auth, 24-hour window, template checks, outcomes by the recipient's last two digits),
 * the management reads with `fields` and cursor paging, and the onboarding calls (code exchange,
 * `subscribed_apps`, `register`). Errors are Graph's `{"error": {message, type, code, …}}`.
 */
import { randomBytes } from 'node:crypto';
import { simOutcome, type PlannedStatus } from './outcomes.js';
import type { WebhookEmitter, WebhookItem } from './emitter.js';
import type { SeedTemplate } from './seed.js';
import type { NumberState, SimMessage, SimState, WabaState } from './state.js';

export interface GraphRequest {
  method: string;
  /** Path segments after the version, decoded. */
  segments: string[];
  query: URLSearchParams;
  authorization: string | undefined;
  /** JSON object, form fields as an object, or undefined when there was no body. */
  body: Record<string, unknown> | undefined;
  /** The simulator's own base URL (for `paging.next`). */
  selfUrl: string;
  version: string;
}

export interface GraphReply {
  status: number;
  body: unknown;
}

/** What can be changed while the simulator runs. */
export interface SimKnobs {
  /** Where webhooks go unless a WABA overrides it; '' for nowhere. */
  callbackUrl: string;
  /** Delay before the first status and between statuses, ms. */
  callbackDelayMs: number;
  /** Every status is sent twice, the copy in a later POST. */
  duplicateStatuses: boolean;
  /** A message's statuses arrive last first (read before delivered before sent). */
  outOfOrder: boolean;
  /** Webhooks are signed with a wrong key. */
  badSignature: boolean;
  /** Free text outside the 24-hour window: sync 400 131047 instead of 200 then `failed` 131047. */
  windowErrorSync: boolean;
  /** Check the 24-hour window for free text at all. */
  enforceWindow: boolean;
  /** Length of the customer-service window, ms. */
  windowMs: number;
}

const TITLES: Readonly<Record<number, string>> = {
  100: 'Invalid parameter',
  131008: 'Required parameter is missing',
  131009: 'Parameter value is not valid',
  131021: 'Recipient cannot be sender',
  131026: 'Message Undeliverable',
  131042: 'Business eligibility payment issue',
  131047: 'Re-engagement message',
  131051: 'Unsupported message type',
  131056: '(Business Account, Consumer Account) pair rate limit hit',
  130429: 'Rate limit hit',
  131000: 'Something went wrong',
  132000: 'Number of parameters does not match the expected number of params',
  132001: 'Template name does not exist in the translation',
  132012: 'Parameter format does not match format in the created template',
  132015: 'Template is Paused',
  132016: 'Template is Disabled',
  133005: 'Two step verification PIN Mismatch',
  133010: 'Phone number Not Registered',
  2200: 'Callback verification failed',
};

const DETAILS: Readonly<Record<number, string>> = {
  131026: 'Message failed to send because the recipient is not a WhatsApp user, has an old client or has not accepted the terms.',
  131042: 'Message failed to send because there were one or more errors related to your payment method.',
  131047: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.',
};

function graphError(status: number, code: number, details?: string, type = 'OAuthException', message?: string): GraphReply {
  const error: Record<string, unknown> = {
    message: message ?? `(#${code}) ${TITLES[code] ?? 'Error'}`,
    type,
    code,
  };
  if (details !== undefined) error.error_data = { messaging_product: 'whatsapp', details };
  error.fbtrace_id = randomBytes(12).toString('base64url');
  return { status, body: { error } };
}

const badToken = (): GraphReply => graphError(401, 190, undefined, 'OAuthException', 'Invalid OAuth access token - Cannot parse access token');
const noObject = (method: string, id: string): GraphReply =>
  graphError(400, 100, undefined, 'GraphMethodException',
    `Unsupported ${method.toLowerCase()} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`);

// ---------------------------------------------------------------------------
// fields and paging

function splitFields(spec: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const c of spec) {
    if (c === '{') depth++;
    if (c === '}') depth--;
    if (c === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else {
      cur += c;
    }
  }
  out.push(cur);
  // `owner_business_info{id,name}`: the sub-selection is answered in full.
  return out.map((f) => f.replace(/\{.*$/s, '').trim()).filter((f) => f !== '');
}

interface NodeType {
  name: string;
  defaults: string[];
  all: ReadonlySet<string>;
}

const PHONE_NODE: NodeType = {
  name: 'WhatsAppBusinessPhoneNumber',
  defaults: ['verified_name', 'code_verification_status', 'display_phone_number', 'quality_rating', 'platform_type', 'throughput', 'id'],
  all: new Set(['id', 'display_phone_number', 'verified_name', 'code_verification_status', 'quality_rating', 'status', 'platform_type', 'name_status', 'messaging_limit_tier', 'account_mode', 'throughput', 'is_official_business_account']),
};
const TEMPLATE_NODE: NodeType = {
  name: 'WhatsAppMessageTemplate',
  defaults: ['name', 'parameter_format', 'components', 'language', 'status', 'category', 'id'],
  all: new Set(['id', 'name', 'language', 'status', 'category', 'sub_category', 'previous_category', 'parameter_format', 'components', 'quality_score', 'rejected_reason']),
};
const WABA_NODE: NodeType = {
  name: 'WhatsAppBusinessAccount',
  defaults: ['id', 'name'],
  all: new Set(['id', 'name', 'currency', 'timezone_id', 'country', 'message_template_namespace', 'owner_business_info', 'account_review_status', 'business_verification_status', 'ownership_type']),
};

function pick(full: Record<string, unknown>, query: URLSearchParams, node: NodeType): { ok: Record<string, unknown> } | { reply: GraphReply } {
  const spec = query.get('fields');
  const fields = spec === null || spec.trim() === '' ? node.defaults : splitFields(spec);
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    if (!node.all.has(f)) return { reply: graphError(400, 100, undefined, 'OAuthException', `(#100) Tried accessing nonexisting field (${f}) on node type (${node.name})`) };
    if (full[f] !== undefined) out[f] = full[f];
  }
  if (!('id' in out)) out.id = full.id;
  return { ok: out };
}

const cursor = (i: number): string => Buffer.from(`sim:${i}`).toString('base64url');

function uncursor(c: string): number | null {
  const m = /^sim:(\d+)$/.exec(Buffer.from(c, 'base64url').toString('utf8'));
  return m ? Number(m[1]) : null;
}

function paged(items: Record<string, unknown>[], req: GraphRequest, node: NodeType, path: string): GraphReply {
  const limitText = req.query.get('limit');
  const limit = limitText === null ? 25 : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return graphError(400, 100, undefined, 'OAuthException', '(#100) Param limit must be a positive integer up to 1000');
  let start = 0;
  const after = req.query.get('after');
  if (after !== null) {
    const i = uncursor(after);
    if (i === null) return graphError(400, 100, undefined, 'OAuthException', '(#100) Invalid cursor');
    start = i + 1;
  }
  const data: Record<string, unknown>[] = [];
  for (const item of items.slice(start, start + limit)) {
    const picked = pick(item, req.query, node);
    if ('reply' in picked) return picked.reply;
    data.push(picked.ok);
  }
  const body: Record<string, unknown> = { data };
  if (data.length > 0) {
    const last = start + data.length - 1;
    const paging: Record<string, unknown> = { cursors: { before: cursor(start), after: cursor(last) } };
    if (last + 1 < items.length) {
      const next = new URL(`${req.selfUrl}/${req.version}${path}`);
      for (const [k, v] of req.query) if (k !== 'after') next.searchParams.set(k, v);
      next.searchParams.set('after', cursor(last));
      paging.next = next.toString();
    }
    body.paging = paging;
  }
  return { status: 200, body };
}

// ---------------------------------------------------------------------------
// objects as Graph shows them

function phoneObject(n: NumberState): Record<string, unknown> {
  return {
    id: n.seed.id, display_phone_number: n.seed.display_phone_number, verified_name: n.seed.verified_name,
    code_verification_status: n.seed.code_verification_status ?? 'VERIFIED', quality_rating: n.seed.quality_rating ?? 'GREEN',
    status: n.status, platform_type: n.pin ? 'CLOUD_API' : 'NOT_APPLICABLE', name_status: 'APPROVED', messaging_limit_tier: 'TIER_1K',
    account_mode: 'LIVE', throughput: { level: 'STANDARD' }, is_official_business_account: false,
  };
}

function templateObject(t: SeedTemplate): Record<string, unknown> {
  return {
    id: t.id, name: t.name, language: t.language, status: t.status ?? 'APPROVED', category: t.category ?? 'UTILITY',
    parameter_format: t.parameter_format ?? 'POSITIONAL', components: t.components ?? [], quality_score: { score: 'UNKNOWN' }, rejected_reason: 'NONE',
  };
}

function wabaObject(w: WabaState, businesses: Map<string, string>): Record<string, unknown> {
  const s = w.seed;
  return {
    id: s.id, name: s.name, currency: s.currency, timezone_id: s.timezone_id ?? '1', country: s.country,
    message_template_namespace: s.message_template_namespace ?? `ns_${s.id}`,
    owner_business_info: { id: s.owner_business_id, name: businesses.get(s.owner_business_id) ?? '' },
    account_review_status: 'APPROVED', business_verification_status: 'verified', ownership_type: 'CLIENT_OWNED',
  };
}

// ---------------------------------------------------------------------------
// template checks (the simulator's own reading of what a template needs)

function variables(text: string | undefined): number {
  return new Set((text ?? '').match(/\{\{\s*\w+\s*\}\}/g)?.map((v) => v.replace(/[{}\s]/g, ''))).size;
}

function componentOf(t: SeedTemplate, type: string): NonNullable<SeedTemplate['components']>[number] | undefined {
  return t.components?.find((c) => c.type === type);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const BUTTON_SUBTYPE: Readonly<Record<string, string>> = { URL: 'url', OTP: 'url', QUICK_REPLY: 'quick_reply', COPY_CODE: 'copy_code', FLOW: 'flow' };

/** Null when the send's components fit the template, else the error answer. */
function checkComponents(t: SeedTemplate, components: unknown[]): GraphReply | null {
  const sent = components.filter(isObj);
  const params = (c: Obj | undefined): Obj[] => (c && Array.isArray(c.parameters) ? c.parameters.filter(isObj) : []);
  const mismatch = (what: string, want: number, got: number): GraphReply =>
    graphError(400, 132000, `${what}: expected number of params (${want}) does not match received number of params (${got})`);
  const header = componentOf(t, 'HEADER');
  const format = header ? (header.format ?? 'TEXT') : undefined;
  const headerWant = format === undefined ? 0 : format === 'TEXT' ? variables(header?.text) : 1;
  const headerGot = params(sent.find((c) => c.type === 'header'));
  if (headerGot.length !== headerWant) return mismatch('header', headerWant, headerGot.length);
  if (format && format !== 'TEXT' && format !== 'LOCATION' && headerGot[0]?.type !== format.toLowerCase()) {
    return graphError(400, 132012, `header: expected ${format}, received ${String(headerGot[0]?.type)}`);
  }
  const bodyGot = params(sent.find((c) => c.type === 'body'));
  const bodyWant = variables(componentOf(t, 'BODY')?.text);
  if (bodyGot.length !== bodyWant) return mismatch('body', bodyWant, bodyGot.length);
  if (t.parameter_format === 'NAMED') {
    for (const [where, list, text] of [['body', bodyGot, componentOf(t, 'BODY')?.text], ['header', headerGot, header?.text]] as const) {
      for (const p of list) {
        if (p.type === 'text' && (typeof p.parameter_name !== 'string' || !(text ?? '').includes(`{{${p.parameter_name}}}`))) {
          return graphError(400, 131008, `${where}: parameter_name missing or not in the template for a NAMED template`);
        }
      }
    }
  }
  const buttons = componentOf(t, 'BUTTONS')?.buttons ?? [];
  for (const c of sent.filter((x) => x.type === 'button')) {
    const index = Number(c.index);
    const b = Number.isInteger(index) ? buttons[index] : undefined;
    if (!b) return graphError(400, 131009, `button index ${String(c.index)} does not exist in the template`);
    if (c.sub_type !== BUTTON_SUBTYPE[b.type]) return graphError(400, 131009, `button ${index}: sub_type ${String(c.sub_type)} does not fit a ${b.type} button`);
  }
  for (const [i, b] of buttons.entries()) {
    const needs = b.type === 'COPY_CODE' || b.type === 'OTP' || (b.type === 'URL' && variables(b.url) > 0);
    const got = params(sent.find((c) => c.type === 'button' && Number(c.index) === i)).length;
    if (needs && got !== 1) return mismatch(`button ${i}`, 1, got);
  }
  return null;
}

// ---------------------------------------------------------------------------

export class GraphApi {
  private seq = 0;
  private readonly idPrefix = randomBytes(4).toString('hex');

  constructor(
    private readonly state: SimState,
    private readonly knobs: SimKnobs,
    private readonly emitter: WebhookEmitter,
    /** Meta's verification GET of a callback URL; rejects when it is not answered right. */
    private readonly verify: (url: string, verifyToken: string) => Promise<void>,
  ) {}

  /** A fresh wamid (Meta's are base64 of an internal id; these only keep the prefix and uniqueness). */
  wamid(to: string): string {
    return `wamid.${Buffer.from(`${this.idPrefix}:${(this.seq++).toString(36)}:${to}`).toString('base64url')}`;
  }

  /** Where a WABA's webhooks go; undefined for nowhere. */
  callbackUrl(wabaId: string): string | undefined {
    return this.state.wabas.get(wabaId)?.override?.url ?? (this.knobs.callbackUrl || undefined);
  }

  private tokenWabas(req: GraphRequest): Set<string> | undefined {
    const m = /^Bearer\s+(\S+)$/i.exec(req.authorization ?? '');
    return m ? this.state.tokens.get(m[1]!) : undefined;
  }

  async handle(req: GraphRequest): Promise<GraphReply> {
    const [id, edge, ...rest] = req.segments;
    if (id === undefined || rest.length > 0) return noObject(req.method, req.segments.join('/'));
    if (id === 'oauth' && edge === 'access_token' && req.method === 'GET') return this.exchange(req);
    if (id === 'debug_token' && edge === undefined && req.method === 'GET') return this.debugToken(req);
    const wabas = this.tokenWabas(req);
    if (!wabas) return badToken();
    const route = `${req.method} ${edge ?? ''}`;
    switch (route) {
      case 'POST messages':
        return this.send(req, id, wabas);
      case 'POST register':
        return this.register(req, id, wabas);
      case 'POST subscribed_apps':
      case 'GET subscribed_apps':
      case 'DELETE subscribed_apps':
        return this.subscribedApps(req, id, wabas);
      case 'GET phone_numbers': {
        if (!wabas.has(id)) return noObject(req.method, id);
        const list = [...this.state.numbers.values()].filter((n) => n.seed.waba_id === id).map(phoneObject);
        return paged(list, req, PHONE_NODE, `/${id}/phone_numbers`);
      }
      case 'GET message_templates': {
        if (!wabas.has(id)) return noObject(req.method, id);
        const q = req.query;
        const list = (this.state.templates.get(id) ?? [])
          .filter((t) => (!q.get('name') || t.name === q.get('name')) && (!q.get('language') || t.language === q.get('language'))
            && (!q.get('status') || (t.status ?? 'APPROVED') === q.get('status')) && (!q.get('category') || t.category === q.get('category')))
          .map(templateObject);
        return paged(list, req, TEMPLATE_NODE, `/${id}/message_templates`);
      }
      case 'GET client_whatsapp_business_accounts': {
        if (!this.state.businesses.has(id)) return noObject(req.method, id);
        const list = [...this.state.wabas.values()].filter((w) => w.shared && w.seed.owner_business_id !== id).map((w) => wabaObject(w, this.state.businesses));
        return paged(list, req, WABA_NODE, `/${id}/client_whatsapp_business_accounts`);
      }
      case 'GET ':
        return this.node(req, id, wabas);
      default:
        return noObject(req.method, `${id}/${edge ?? ''}`);
    }
  }

  private node(req: GraphRequest, id: string, wabas: Set<string>): GraphReply {
    const waba = this.state.wabas.get(id);
    if (waba && wabas.has(id)) return this.picked(wabaObject(waba, this.state.businesses), req, WABA_NODE);
    const number = this.state.numbers.get(id);
    if (number && wabas.has(number.seed.waba_id)) return this.picked(phoneObject(number), req, PHONE_NODE);
    const business = this.state.businesses.get(id);
    if (business !== undefined) return { status: 200, body: { id, name: business } };
    return noObject(req.method, id);
  }

  private picked(full: Record<string, unknown>, req: GraphRequest, node: NodeType): GraphReply {
    const out = pick(full, req.query, node);
    return 'reply' in out ? out.reply : { status: 200, body: out.ok };
  }

  // -------------------------------------------------------------------------
  // sending

  private send(req: GraphRequest, id: string, wabas: Set<string>): GraphReply {
    const number = this.state.numbers.get(id);
    if (!number) return noObject(req.method, id);
    if (!wabas.has(number.seed.waba_id)) {
      return graphError(401, 190, undefined, 'OAuthException', '(#190) The access token does not grant access to this phone number');
    }
    const b = req.body;
    if (!b) return graphError(400, 100, 'The request body must be JSON');
    if (b.messaging_product !== 'whatsapp') return graphError(400, 100, undefined, 'OAuthException', '(#100) The parameter messaging_product is required.');
    if (typeof b.to !== 'string' || !/^\+?\d{6,20}$/.test(b.to)) return graphError(400, 100, 'Param to must be a phone number');
    const to = b.to.replace(/^\+/, '');
    const ourRef = typeof b.biz_opaque_callback_data === 'string' ? b.biz_opaque_callback_data : undefined;
    if (ourRef !== undefined && ourRef.length > 512) return graphError(400, 100, 'Param biz_opaque_callback_data must be at most 512 characters long.');
    const record: SimMessage = {
      id: null, at: new Date().toISOString(), phone_number_id: id, waba_id: number.seed.waba_id, to, type: String(b.type), http_status: 200, statuses: [],
    };
    if (ourRef !== undefined) record.biz_opaque_callback_data = ourRef;
    const refuse = (reply: GraphReply): GraphReply => {
      const e = (reply.body as { error: { code: number; message: string } }).error;
      record.http_status = reply.status;
      record.error = { code: e.code, title: e.message.replace(/^\(#\d+\)\s*/, '') };
      this.state.record(record);
      return reply;
    };
    if (!number.pin) return refuse(graphError(400, 133010, 'The phone number is not registered on the Cloud API.'));

    let planned: PlannedStatus[];
    let category = 'service';
    if (b.type === 'text') {
      const text = isObj(b.text) ? b.text.body : undefined;
      if (typeof text !== 'string' || text === '') return refuse(graphError(400, 131008, 'Param text[\'body\'] is required'));
      if (text.length > 4096) return refuse(graphError(400, 100, 'Param text[\'body\'] must be at most 4096 characters long.'));
      record.text = text;
      const last = this.state.lastInbound.get(`${id} ${to}`);
      const inside = !this.knobs.enforceWindow || (last !== undefined && Date.now() - last <= this.knobs.windowMs);
      if (!inside && this.knobs.windowErrorSync) return refuse(graphError(400, 131047, DETAILS[131047]));
      planned = inside ? [] : [{ status: 'failed', code: 131047 }];
    } else if (b.type === 'template') {
      const t = isObj(b.template) ? b.template : undefined;
      const name = t?.name;
      const language = isObj(t?.language) ? t.language.code : undefined;
      if (typeof name !== 'string' || name === '') return refuse(graphError(400, 131008, 'Param template[\'name\'] is required'));
      if (typeof language !== 'string' || language === '') return refuse(graphError(400, 131008, 'Param template[\'language\'][\'code\'] is required'));
      const components = t?.components === undefined ? [] : t.components;
      if (!Array.isArray(components)) return refuse(graphError(400, 100, 'Param template[\'components\'] must be an array'));
      record.template = { name, language, components };
      const found = (this.state.templates.get(number.seed.waba_id) ?? []).find((x) => x.name === name && x.language === language);
      const status = found?.status ?? 'APPROVED';
      if (!found || !['APPROVED', 'PAUSED', 'DISABLED'].includes(status)) {
        return refuse(graphError(400, 132001, `template name (${name}) does not exist in ${language}`));
      }
      if (status === 'PAUSED') return refuse(graphError(400, 132015, `template ${name} is paused because of low quality`));
      if (status === 'DISABLED') return refuse(graphError(400, 132016, `template ${name} is disabled`));
      const bad = checkComponents(found, components);
      if (bad) return refuse(bad);
      category = (found.category ?? 'UTILITY').toLowerCase();
      planned = [];
    } else {
      return refuse(graphError(400, 131051, `message type ${String(b.type)} is not supported by the simulator`));
    }

    const outcome = simOutcome(to);
    if (planned.length === 0) {
      if (outcome.error) {
        const failing = outcome.failFirst === undefined || this.state.flakyTry(`${id} ${to} ${ourRef ?? ''}`) < outcome.failFirst;
        if (failing) return refuse(graphError(outcome.error.http, outcome.error.code, outcome.error.code === 131000 ? 'An unknown error occurred' : undefined));
      }
      planned = outcome.statuses;
    }
    const wamid = this.wamid(to);
    record.id = wamid;
    this.state.record(record);
    this.scheduleStatuses(record, number, planned, category);
    const message: Record<string, unknown> = { id: wamid };
    if (b.type === 'template') message.message_status = 'accepted';
    return { status: 200, body: { messaging_product: 'whatsapp', contacts: [{ input: b.to, wa_id: to }], messages: [message] } };
  }

  private scheduleStatuses(record: SimMessage, number: NumberState, planned: PlannedStatus[], category: string): void {
    const url = this.callbackUrl(number.seed.waba_id);
    const d = Math.max(0, this.knobs.callbackDelayMs);
    const now = Date.now();
    const n = planned.length;
    planned.forEach((p, i) => {
      record.statuses.push(p.status);
      if (!url) return;
      // Out of order: delivered last first, but each status keeps the time it happened at.
      const happened = now + d * (i + 1);
      const at = this.knobs.outOfOrder ? now + d * (n - i) : happened;
      const status: Record<string, unknown> = {
        id: record.id, status: p.status, timestamp: String(Math.floor(happened / 1000)), recipient_id: record.to,
      };
      if (record.biz_opaque_callback_data !== undefined) status.biz_opaque_callback_data = record.biz_opaque_callback_data;
      if (p.status === 'failed') {
        const code = p.code ?? 131000;
        const title = TITLES[code] ?? 'Error';
        status.errors = [{ code, title, message: title, error_data: { details: DETAILS[code] ?? title }, href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/' }];
      } else {
        const service = category === 'service';
        status.pricing = { billable: !service, pricing_model: 'PMP', type: service ? 'free_customer_service' : 'regular', category };
      }
      const item: WebhookItem = { field: 'messages', wabaId: number.seed.waba_id, phoneNumberId: number.seed.id, displayPhoneNumber: number.seed.display_phone_number, status };
      this.emitter.schedule(at, url, item);
      if (this.knobs.duplicateStatuses) this.emitter.schedule(at + Math.max(d, 1), url, item, 1);
    });
  }

  // -------------------------------------------------------------------------
  // onboarding

  private exchange(req: GraphRequest): GraphReply {
    const q = req.query;
    const app = this.state.seed.app;
    if (q.get('client_id') !== app.id) return graphError(400, 101, undefined, 'OAuthException', 'Error validating application. Invalid application ID.');
    if (q.get('client_secret') !== app.secret) return graphError(400, 1, undefined, 'OAuthException', 'Error validating client secret.');
    const code = this.state.codes.get(q.get('code') ?? '');
    if (!code) return graphError(400, 100, undefined, 'OAuthException', 'Invalid verification code format.');
    if (code.used) return graphError(400, 100, undefined, 'OAuthException', 'This authorization code has been used.');
    code.used = true;
    const waba = this.state.wabas.get(code.waba_id)!;
    waba.shared = true;
    waba.partnerAddedDue = true;
    return { status: 200, body: { access_token: this.state.mintToken([code.waba_id]), token_type: 'bearer' } };
  }

  private async subscribedApps(req: GraphRequest, id: string, wabas: Set<string>): Promise<GraphReply> {
    const waba = this.state.wabas.get(id);
    if (!waba || !wabas.has(id)) return noObject(req.method, id);
    const app = this.state.seed.app;
    if (req.method === 'GET') {
      const data = waba.subscribed ? [{ whatsapp_business_api_data: { id: app.id, name: app.name ?? 'App' }, ...(waba.override ? { override_callback_uri: waba.override.url } : {}) }] : [];
      return { status: 200, body: { data } };
    }
    if (req.method === 'DELETE') {
      waba.subscribed = false;
      delete waba.override;
      return { status: 200, body: { success: true } };
    }
    const param = (k: string): string | undefined => {
      const v = req.body?.[k] ?? req.query.get(k) ?? undefined;
      return typeof v === 'string' && v !== '' ? v : undefined;
    };
    const uri = param('override_callback_uri');
    if (uri !== undefined) {
      const verifyToken = param('verify_token');
      if (verifyToken === undefined) return graphError(400, 100, undefined, 'OAuthException', '(#100) Param verify_token is required with override_callback_uri');
      try {
        new URL(uri);
        await this.verify(uri, verifyToken);
      } catch (err) {
        return graphError(400, 2200, undefined, 'OAuthException', `(#2200) Callback verification failed with the following errors: ${err instanceof Error ? err.message : String(err)}`);
      }
      waba.override = { url: uri, verifyToken };
    }
    waba.subscribed = true;
    if (waba.partnerAddedDue) {
      waba.partnerAddedDue = false;
      const url = this.callbackUrl(id);
      if (url) {
        this.emitter.schedule(Date.now(), url, {
          field: 'account_update', wabaId: id,
          value: { event: 'PARTNER_ADDED', waba_info: { waba_id: id, owner_business_id: waba.seed.owner_business_id } },
        });
      }
    }
    return { status: 200, body: { success: true } };
  }

  private register(req: GraphRequest, id: string, wabas: Set<string>): GraphReply {
    const number = this.state.numbers.get(id);
    if (!number || !wabas.has(number.seed.waba_id)) return noObject(req.method, id);
    const body = req.body ?? {};
    const pin = body.pin ?? req.query.get('pin');
    if (body.messaging_product !== 'whatsapp' && req.query.get('messaging_product') !== 'whatsapp') {
      return graphError(400, 100, undefined, 'OAuthException', '(#100) The parameter messaging_product is required.');
    }
    if (typeof pin !== 'string' || !/^\d{6}$/.test(pin)) return graphError(400, 100, undefined, 'OAuthException', '(#100) Param pin must be 6 digits');
    if (number.pin !== undefined && number.pin !== pin) return graphError(400, 133005, 'The two-step verification PIN is not the one set for this number.');
    number.pin = pin;
    number.status = 'CONNECTED';
    return { status: 200, body: { success: true } };
  }

  private debugToken(req: GraphRequest): GraphReply {
    const app = this.state.seed.app;
    const caller = /^Bearer\s+(\S+)$/i.exec(req.authorization ?? '')?.[1];
    if (caller !== `${app.id}|${app.secret}` && (caller === undefined || !this.state.tokens.has(caller))) return badToken();
    const input = req.query.get('input_token') ?? '';
    const wabas = this.state.tokens.get(input);
    const base = { app_id: app.id, type: 'SYSTEM_USER', application: app.name ?? 'App' };
    if (!wabas) return { status: 200, body: { data: { ...base, is_valid: false, error: { code: 190, message: 'Invalid OAuth access token.' } } } };
    const targets = [...wabas];
    return {
      status: 200,
      body: {
        data: {
          ...base, is_valid: true, expires_at: 0, data_access_expires_at: 0,
          scopes: ['whatsapp_business_management', 'whatsapp_business_messaging'],
          granular_scopes: [{ scope: 'whatsapp_business_management', target_ids: targets }, { scope: 'whatsapp_business_messaging', target_ids: targets }],
        },
      },
    };
  }
}

/** The Graph error answer for a bad path or version (code 100). */
export function unknownPath(message: string): GraphReply {
  return graphError(400, 100, undefined, 'OAuthException', message);
}
