/**
 * The message object of the sending APIs, validated exactly as the spec's tables say. Joi runs
 * with `convert: false`: a number given as a string, a null or a wrong type is an error naming
 * the field, never silently coerced.
 */
import Joi from 'joi';
import type { DeliveryWindow } from '../schedule/window.js';
import { findUnstorable } from '../unstorable-text.js';
import { checkHttpUrl } from '../net/ssrf.js';

export const MAX_BODY_CHARS = 1000;
export const MAX_RECIPIENTS = 10;
/** The XML API has no 10-recipient limit per Request (it predates v2's); the document size caps it. */
export const MAX_XML_RECIPIENTS = 1000;
export const MAX_OBJECTS = 10;

export interface SmsStep { body?: string; sender?: string; gateway?: 'high' | 'direct' | 'custom'; ttl?: number; type?: 'utf' | 'sms' }
export interface ViberStep { body?: string; sender: string; buttons?: Array<{ title: string; url: string }>; ttl?: number }
export interface WhatsappTextStep { body?: string; sender: string; ttl?: number }
export interface WhatsappTemplateStep {
  template_name: string; sender?: string; language?: string;
  params?: string[]; params_header?: string[]; params_buttons?: string[]; ttl?: number;
}
export type FlowStep =
  | { sms: SmsStep }
  | { viber: ViberStep }
  | { whatsapp_text: WhatsappTextStep }
  | { whatsapp_template: WhatsappTemplateStep };

export interface MessageInput {
  body?: string;
  to: Array<{ phone_number: string }>;
  flow?: FlowStep[];
  callback?: string;
  tag?: string;
  params?: Record<string, unknown>;
  datetime?: string;
  delivery_time?: DeliveryWindow;
  payload?: Record<string, unknown>;
}

/** Length in characters (code points), as the spec counts them; Joi's max() counts UTF-16 units. */
export function charLength(s: string): number {
  if (s.length <= MAX_BODY_CHARS) {
    return s.length;
  }
  let n = 0;
  for (const _ of s) {
    n++;
  }
  return n;
}

const text = Joi.string().min(1).custom((value: string, helpers) =>
  charLength(value) > MAX_BODY_CHARS ? helpers.error('string.maxChars', { limit: MAX_BODY_CHARS }) : value)
  .messages({ 'string.maxChars': 'must be at most {#limit} characters long' });

/** Alphanumeric sender name (max 11) or a dedicated number without `+` (max 15 digits). */
const smsSender = Joi.string().pattern(/^(?:[0-9]{1,15}|(?=.*[A-Za-z])[A-Za-z0-9 .&_-]{1,11})$/)
  .messages({ 'string.pattern.base': 'must be an alphanumeric name of at most 11 characters or a number of at most 15 digits without +' });
const ttl = Joi.number().integer().min(1).max(7 * 24 * 60);
// Joi's uri() takes `http://%zz/` and port 99999; the service's HTTP client parses URLs with
// WHATWG URL, so that is the check that decides (checkHttpUrl).
const httpUri = Joi.string().max(2048).uri({ scheme: ['http', 'https'] }).custom((value: string, helpers) => {
  const check = checkHttpUrl(value);
  return check.ok ? value : helpers.error('string.httpUrl', { reason: check.reason });
}).messages({ 'string.httpUrl': '{#reason}' });
const stringList = Joi.array().items(Joi.string().max(1024)).max(100);

const smsSchema = Joi.object<SmsStep>({
  body: text,
  sender: smsSender,
  gateway: Joi.string().valid('high', 'direct', 'custom'),
  ttl,
  type: Joi.string().valid('utf', 'sms'),
});
const viberSchema = Joi.object<ViberStep>({
  body: text,
  sender: Joi.string().min(1).max(100).required(),
  buttons: Joi.array().items(Joi.object({ title: Joi.string().min(1).max(100).required(), url: httpUri.required() })).max(1),
  ttl,
});
const whatsappTextSchema = Joi.object<WhatsappTextStep>({
  body: text,
  sender: Joi.string().min(1).max(64).required(),
  ttl,
});
const whatsappTemplateSchema = Joi.object<WhatsappTemplateStep>({
  template_name: Joi.string().min(1).max(100).required(),
  sender: Joi.string().min(1).max(64),
  language: Joi.string().min(2).max(15),
  params: stringList,
  params_header: stringList,
  params_buttons: stringList,
  ttl,
});

const flowStep = Joi.object({
  sms: smsSchema,
  viber: viberSchema,
  whatsapp_text: whatsappTextSchema,
  whatsapp_template: whatsappTemplateSchema,
}).length(1).messages({ 'object.length': 'must have exactly one property: sms, viber, whatsapp_text or whatsapp_template' });

/** `to`: 1..max recipient objects; `phone_number` is a schema error only when it is not a non-empty string (D2). */
function recipientsSchema(max: number) {
  return Joi.array().items(Joi.object({ phone_number: Joi.string().min(1).required() })).min(1).max(max).required();
}

/** The same schema allowing up to `max` recipients (the XML API's Requests). */
export function messageSchemaWithRecipients(max: number): Joi.ObjectSchema<MessageInput> {
  return messageSchema.keys({ to: recipientsSchema(max) });
}

export const messageSchema = Joi.object<MessageInput>({
  body: text,
  // D2: `phone_number` is a schema error only when it is not a non-empty string; anything else is
  // accepted and, when it cannot be normalised, reported later as a `[302]` rejected event.
  to: recipientsSchema(MAX_RECIPIENTS),
  flow: Joi.array().items(flowStep).min(1).max(10),
  callback: httpUri,
  tag: Joi.string().min(1).max(100),
  params: Joi.object().unknown(true),
  datetime: Joi.string().min(1).max(64),
  delivery_time: Joi.object({
    days: Joi.array().items(Joi.string()).min(1).max(7),
    start: Joi.string(),
    end: Joi.string(),
    tz: Joi.string().max(64),
  }),
  payload: Joi.object().unknown(true),
});

export type Channel = 'sms' | 'viber' | 'whatsapp_text' | 'whatsapp_template';

/** The channel name and its object of a flow step. */
export function stepChannel(step: FlowStep): { channel: Channel; config: SmsStep & ViberStep & WhatsappTextStep & WhatsappTemplateStep } {
  const [channel, config] = Object.entries(step)[0] as [Channel, SmsStep & ViberStep & WhatsappTextStep & WhatsappTemplateStep];
  return { channel, config };
}

/** D2: no flow means one SMS step with gateway `high`. */
export function effectiveFlow(input: MessageInput): FlowStep[] {
  return input.flow ?? [{ sms: {} }];
}

/**
 * The first string (or property name) of a validated message that cannot be stored as text, as
 * `<field path>: <what is wrong>`, or null. `payload` is exempt: it is kept in a `json` column,
 * which stores such escapes as written, and is returned unchanged.
 */
export function unstorableText(input: MessageInput): string | null {
  for (const [name, value] of Object.entries(input)) {
    if (name !== 'payload') {
      const problem = findUnstorable(value, name);
      if (problem) {
        return problem;
      }
    }
  }
  return null;
}

/** "body required unless every flow channel defines its own" (templates need none): the first step that lacks one. */
export function stepMissingBody(input: MessageInput): number | null {
  if (input.body !== undefined) {
    return null;
  }
  const flow = effectiveFlow(input);
  for (let i = 0; i < flow.length; i++) {
    const { channel, config } = stepChannel(flow[i]!);
    if (channel !== 'whatsapp_template' && config.body === undefined) {
      return i;
    }
  }
  return null;
}
