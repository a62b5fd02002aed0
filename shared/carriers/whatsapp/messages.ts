/**
 * Builders of the `POST /{version}/{phone-number-id}/messages` body (channels.md 1.2) and the
 * parameter-count check done against a cached template before calling Meta (so a wrong count
 * fails the step with `[132000]` without a round trip). Pure functions.
 *
 * Mapping of the spec's `whatsapp_template`: `params` → body parameters in placeholder order;
 * `params_header` → the header parameter (text, or media when the header is a media header or,
 * with no cached template, when the value is an http(s) URL); `params_buttons[i]` → a button
 * component with `index` "i" (an empty string skips that button: it has no variable).
 */
import type { SendOutcome } from '../http-carrier.js';
import { errorInfo, graphErrorTitle } from './errors.js';
import type { GraphParameter, GraphSendBody, GraphSendComponent, GraphTemplate, GraphTemplateComponent } from './types.js';

/** Language used when the step names none and no cached template says which one is registered. */
export const DEFAULT_TEMPLATE_LANGUAGE = 'en_US';

export interface TextMessageInput {
  /** E.164 digits, with or without `+`. */
  to: string;
  text: string;
  /** Our per-attempt reference, echoed by Meta in status webhooks. */
  ourRef?: string;
  /** A wamid to quote. */
  replyTo?: string;
}

export interface TemplateMessageInput {
  to: string;
  name: string;
  language?: string;
  params?: readonly string[];
  paramsHeader?: readonly string[];
  paramsButtons?: readonly string[];
  ourRef?: string;
}

function digits(to: string): string {
  return to.startsWith('+') ? to.slice(1) : to;
}

function envelope(to: string, ourRef: string | undefined): Pick<GraphSendBody, 'messaging_product' | 'recipient_type' | 'to'> & { biz_opaque_callback_data?: string } {
  const body: Pick<GraphSendBody, 'messaging_product' | 'recipient_type' | 'to'> & { biz_opaque_callback_data?: string } = {
    messaging_product: 'whatsapp', recipient_type: 'individual', to: digits(to),
  };
  if (ourRef !== undefined) body.biz_opaque_callback_data = ourRef;
  return body;
}

export function buildTextMessage(input: TextMessageInput): GraphSendBody {
  const body: GraphSendBody = { ...envelope(input.to, input.ourRef), type: 'text', text: { body: input.text, preview_url: false } };
  if (input.replyTo) body.context = { message_id: input.replyTo };
  return body;
}

// ---------------------------------------------------------------------------
// What a registered template expects

export type MediaKind = 'image' | 'video' | 'document';

/** What one button of a template takes in a send. */
export interface ButtonShape {
  /** Meta's button type, upper case (URL, QUICK_REPLY, COPY_CODE, OTP, FLOW, PHONE_NUMBER, …). */
  type: string;
  /** Whether a send must give this button a parameter. */
  required: boolean;
  /** Whether a send may give it one. */
  takesParam: boolean;
}

export interface TemplateShape {
  named: boolean;
  /** Parameter names of the body (named templates) or `1`..`n`, in placeholder order. */
  body: string[];
  /** The header's parameters: 0 or 1 (a text variable or a media header). */
  header: string[];
  /** TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION; undefined without a header. */
  headerFormat?: string;
  buttons: ButtonShape[];
}

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g;

function placeholders(text: string | undefined): string[] {
  if (!text) return [];
  const seen = new Set<string>();
  for (const m of text.matchAll(PLACEHOLDER)) seen.add(m[1]!);
  return [...seen];
}

function component(template: GraphTemplate, type: string): GraphTemplateComponent | undefined {
  return template.components?.find((c) => c.type?.toUpperCase() === type);
}

function buttonShape(type: string, url: string | undefined): ButtonShape {
  switch (type) {
    case 'URL': {
      const variable = placeholders(url).length > 0;
      return { type, required: variable, takesParam: variable };
    }
    case 'COPY_CODE':
    case 'OTP':
      return { type, required: true, takesParam: true };
    case 'QUICK_REPLY':
    case 'FLOW':
    case 'CATALOG':
    case 'MPM':
      return { type, required: false, takesParam: true };
    default:
      return { type, required: false, takesParam: false };
  }
}

export function templateShape(template: GraphTemplate): TemplateShape {
  const named = template.parameter_format === 'NAMED';
  const body = component(template, 'BODY');
  const header = component(template, 'HEADER');
  const headerFormat = header?.format?.toUpperCase() ?? (header ? 'TEXT' : undefined);
  let headerParams: string[] = [];
  if (headerFormat === 'TEXT') headerParams = placeholders(header?.text).slice(0, 1);
  else if (headerFormat !== undefined) headerParams = ['media'];
  const buttons = (component(template, 'BUTTONS')?.buttons ?? []).map((b) => buttonShape(String(b.type).toUpperCase(), b.url));
  return { named, body: placeholders(body?.text), header: headerParams, headerFormat, buttons };
}

/** The cached template a step names: exact name and language, else (no language given) an APPROVED one of that name. */
export function findTemplate(templates: readonly GraphTemplate[], name: string, language?: string): GraphTemplate | undefined {
  if (language !== undefined) return templates.find((t) => t.name === name && t.language === language);
  const ofName = templates.filter((t) => t.name === name);
  return ofName.find((t) => t.status === undefined || t.status === 'APPROVED') ?? ofName[0];
}

function countMismatch(what: string, expected: number, got: number): SendOutcome {
  const code = 132000;
  return {
    kind: 'failed', code, config: false,
    info: `${errorInfo(code, graphErrorTitle(code)!)} (${what}: template expects ${expected}, step gives ${got})`,
  };
}

/**
 * Checks the step's parameter counts against the cached template. Null when they fit; else the
 * outcome to end the step with, `[132000] Template Param Count Mismatch (…)`.
 */
export function checkTemplateParams(template: GraphTemplate, input: Pick<TemplateMessageInput, 'params' | 'paramsHeader' | 'paramsButtons'>): SendOutcome | null {
  const shape = templateShape(template);
  const body = input.params?.length ?? 0;
  if (body !== shape.body.length) return countMismatch('body parameters', shape.body.length, body);
  const header = input.paramsHeader?.length ?? 0;
  if (header !== shape.header.length) return countMismatch('header parameters', shape.header.length, header);
  const given = input.paramsButtons ?? [];
  const expected = shape.buttons.filter((b) => b.required).length;
  for (let i = 0; i < Math.max(given.length, shape.buttons.length); i++) {
    const has = (given[i] ?? '') !== '';
    const button = shape.buttons[i];
    const bad = button ? (button.required && !has) || (!button.takesParam && has) : has;
    if (bad) return countMismatch(`button ${i} parameters`, expected, given.filter((v) => v !== '').length);
  }
  return null;
}

// ---------------------------------------------------------------------------
// Template body

const EXTENSIONS: ReadonlyMap<string, MediaKind> = new Map<string, MediaKind>([
  ...['jpg', 'jpeg', 'png', 'webp', 'gif'].map((e) => [e, 'image'] as [string, MediaKind]),
  ...['mp4', '3gp', '3gpp', 'mov'].map((e) => [e, 'video'] as [string, MediaKind]),
  ...['pdf', 'doc', 'docx', 'xls', 'xlsx', 'ppt', 'pptx', 'txt', 'csv'].map((e) => [e, 'document'] as [string, MediaKind]),
]);

function isHttpUrl(value: string): boolean {
  return /^https?:\/\/\S+$/i.test(value);
}

function lastSegment(url: string): string {
  try {
    return decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '');
  } catch {
    return '';
  }
}

/** The media kind of a URL by its path's extension; image when it has none we know. */
export function mediaKindOfUrl(url: string): MediaKind {
  const name = lastSegment(url);
  const dot = name.lastIndexOf('.');
  return (dot >= 0 ? EXTENSIONS.get(name.slice(dot + 1).toLowerCase()) : undefined) ?? 'image';
}

function mediaParameter(kind: MediaKind, value: string): GraphParameter {
  const media = isHttpUrl(value) ? { link: value } : { id: value };
  if (kind === 'document') {
    const filename = isHttpUrl(value) ? lastSegment(value) : '';
    return { type: 'document', document: filename ? { ...media, filename } : media };
  }
  return kind === 'image' ? { type: 'image', image: media } : { type: 'video', video: media };
}

function textParameter(text: string, name: string | undefined): GraphParameter {
  return name === undefined ? { type: 'text', text } : { type: 'text', text, parameter_name: name };
}

function headerParameter(value: string, shape: TemplateShape | undefined): GraphParameter {
  const format = shape?.headerFormat;
  if (format === 'IMAGE' || format === 'VIDEO' || format === 'DOCUMENT') return mediaParameter(format.toLowerCase() as MediaKind, value);
  if (format === undefined && isHttpUrl(value)) return mediaParameter(mediaKindOfUrl(value), value);
  return textParameter(value, shape?.named ? shape.header[0] : undefined);
}

function buttonComponent(index: number, value: string, type: string | undefined): GraphSendComponent {
  const base = { type: 'button' as const, index: String(index) };
  switch (type) {
    case 'QUICK_REPLY':
      return { ...base, sub_type: 'quick_reply', parameters: [{ type: 'payload', payload: value }] };
    case 'COPY_CODE':
      return { ...base, sub_type: 'copy_code', parameters: [{ type: 'coupon_code', coupon_code: value }] };
    case 'FLOW':
      return { ...base, sub_type: 'flow', parameters: [{ type: 'action', action: { flow_token: value } }] };
    default:
      // URL buttons, and OTP buttons of authentication templates, take the value as a text parameter.
      return { ...base, sub_type: 'url', parameters: [{ type: 'text', text: value }] };
  }
}

/**
 * The send body of a template step. `template` is the cached registered template when known: it
 * gives the language, named parameters, the header's media kind and the buttons' sub types.
 */
export function buildTemplateMessage(input: TemplateMessageInput, template?: GraphTemplate): GraphSendBody {
  const shape = template ? templateShape(template) : undefined;
  const components: GraphSendComponent[] = [];
  const header = input.paramsHeader ?? [];
  if (header.length > 0) components.push({ type: 'header', parameters: header.map((v) => headerParameter(v, shape)) });
  const params = input.params ?? [];
  if (params.length > 0) {
    components.push({ type: 'body', parameters: params.map((v, i) => textParameter(v, shape?.named ? shape.body[i] : undefined)) });
  }
  (input.paramsButtons ?? []).forEach((value, i) => {
    if (value !== '') components.push(buttonComponent(i, value, shape?.buttons[i]?.type));
  });
  const code = input.language ?? template?.language ?? DEFAULT_TEMPLATE_LANGUAGE;
  const body: GraphSendBody = {
    ...envelope(input.to, input.ourRef),
    type: 'template',
    template: { name: input.name, language: { code, policy: 'deterministic' } },
  };
  if (components.length > 0) body.template!.components = components;
  return body;
}
