/** The `sms` channel (spec: `sms` channel object; D2 encodings, gateways and default sender). */
import Joi from 'joi';
import type { SmsEncoding } from '../sms/gsm7.js';
import { bodyText, ttl, worded } from './fields.js';
import type { AttemptBase, ChannelModule, StepBase } from './types.js';

export const SMS_GATEWAYS = ['high', 'direct', 'custom'] as const;
export type SmsGateway = (typeof SMS_GATEWAYS)[number];
/** D2: a step that names no gateway (and a message without a flow) uses `high`. */
export const DEFAULT_SMS_GATEWAY: SmsGateway = 'high';

export interface SmsStep extends StepBase {
  body?: string;
  gateway?: SmsGateway;
  type?: 'utf' | 'sms';
}

export interface SmsAttempt extends AttemptBase {
  channel: 'sms';
  encoding: SmsEncoding;
  /** The text of each part (one element for a single-part SMS). */
  parts: string[];
  smsGateway: SmsGateway;
}

/**
 * Alphanumeric sender name (max 11) or a dedicated number without `+` (max 15 digits): a step's
 * `sender`, and the defaults that stand in for it (an account's `default_sender`, `DEFAULT_SENDER`).
 */
export const SMS_SENDER = /^(?:[0-9]{1,15}|(?=.*[A-Za-z])[A-Za-z0-9 .&_-]{1,11})$/;
export const SMS_SENDER_RULE = 'must be an alphanumeric name of at most 11 characters or a number of at most 15 digits without +';
const smsSender = Joi.string().custom(worded((value: string) => SMS_SENDER.test(value) ? null : SMS_SENDER_RULE));

function gatewayOf(step: { gateway?: unknown } | undefined): SmsGateway {
  const gateway = step?.gateway;
  return gateway === 'direct' || gateway === 'custom' ? gateway : DEFAULT_SMS_GATEWAY;
}

/**
 * The gateway of an SMS attempt made at a stored flow step (`{"sms": {...}}`): what the step
 * names, else `high`, as `COALESCE(flow -> step -> 'sms' ->> 'gateway', 'high')` reads it.
 */
export function smsGatewayOf(flowStep: unknown): SmsGateway {
  return gatewayOf((flowStep as { sms?: { gateway?: unknown } } | null | undefined)?.sms ?? undefined);
}

export const sms: ChannelModule<'sms', SmsStep, SmsAttempt> = {
  name: 'sms',
  family: 'sms',
  eventKey: 'sms',
  schema: Joi.object<SmsStep>({
    body: bodyText,
    sender: smsSender,
    gateway: Joi.string().valid(...SMS_GATEWAYS),
    ttl,
    type: Joi.string().valid('utf', 'sms'),
  }),
  succeedsAt: 'sent',
  needsBody: true,
  label: 'SMS',
  defaultSender: (_step, input) => input.defaultSmsSender,
  plan(step, input) {
    const plan = input.planSms(input.text ?? '', step.type ?? 'utf');
    const b = input.base;
    return {
      attempt: {
        attemptId: b.attemptId, recipientPublicId: b.recipientPublicId, accountId: b.accountId, to: b.to, sender: b.sender,
        text: plan.text, ttlMinutes: b.ttlMinutes, channel: 'sms', encoding: plan.encoding, parts: plan.parts, smsGateway: gatewayOf(step),
      },
      count: plan.parts.length,
    };
  },
};
