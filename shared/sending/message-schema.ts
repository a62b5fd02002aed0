/**
 * The message object of the sending APIs, validated exactly as the spec's tables say. Joi runs
 * with `convert: false`: a number given as a string, a null or a wrong type is an error naming
 * the field, never silently coerced.
 */
import Joi from 'joi';
import type { DeliveryWindow } from '../schedule/window.js';
import { bodyText, httpUri } from '../channels/fields.js';
import { channelModule, flowStepSchema, stepBody, stepOf, type FlowStep } from '../channels/index.js';
import { findUnstorable } from '../unstorable-text.js';
import { IDEMPOTENCY_KEY_PATTERN } from './idempotency.js';

export const MAX_RECIPIENTS = 10;
/** The XML API has no 10-recipient limit per Request (it predates v2's); the document size caps it. */
export const MAX_XML_RECIPIENTS = 1000;
export const MAX_OBJECTS = 10;

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
  /** Idempotency of this object (issue 27, sending/idempotency.ts): not stored with the message. */
  idempotency_key?: string;
}

/** `to`: 1..max recipient objects; `phone_number` is a schema error only when it is not a non-empty string (D2). */
function recipientsSchema(max: number) {
  return Joi.array().items(Joi.object({ phone_number: Joi.string().min(1).required() })).min(1).max(max).required();
}

/** The same schema allowing up to `max` recipients (the XML API's Requests). */
export function messageSchemaWithRecipients(max: number): Joi.ObjectSchema<MessageInput> {
  return messageSchema.keys({ to: recipientsSchema(max) });
}

export const messageSchema = Joi.object<MessageInput>({
  body: bodyText,
  // D2: `phone_number` is a schema error only when it is not a non-empty string; anything else is
  // accepted and, when it cannot be normalised, reported later as a `[302]` rejected event.
  to: recipientsSchema(MAX_RECIPIENTS),
  flow: Joi.array().items(flowStepSchema).min(1).max(10),
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
  // 1-255 printable ASCII characters, as the Idempotency-Key header.
  idempotency_key: Joi.string().pattern(IDEMPOTENCY_KEY_PATTERN, '1 to 255 printable ASCII characters'),
});

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
    const step = stepOf(flow[i]!);
    if (channelModule(step.channel).needsBody && stepBody(step) === undefined) {
      return i;
    }
  }
  return null;
}
