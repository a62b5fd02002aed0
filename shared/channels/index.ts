/**
 * The channel registry: every channel module, and what the rest of the service derives from it.
 * Adding a channel is a module in this folder and one entry in `CHANNEL_MODULES`; the compiler
 * then points at every exhaustive switch on channels that needs a case.
 */
import Joi from 'joi';
import { worded } from './fields.js';
import { sms } from './sms.js';
import { viber } from './viber.js';
import { whatsappText } from './whatsapp-text.js';
import { whatsappTemplate } from './whatsapp-template.js';
import type { AttemptState, ChannelModule, Family, PlanInput, Planned, StepBase } from './types.js';

export const CHANNEL_MODULES = {
  sms,
  viber,
  whatsapp_text: whatsappText,
  whatsapp_template: whatsappTemplate,
} as const;

type Modules = typeof CHANNEL_MODULES;
export type Channel = keyof Modules;
export const CHANNELS = Object.keys(CHANNEL_MODULES) as Channel[];

type StepOfModule<M> = M extends ChannelModule<string, infer S, infer _A> ? S : never;
type AttemptOfModule<M> = M extends ChannelModule<string, infer _S, infer A> ? A : never;

/** The step object of channel `C`. */
export type StepOf<C extends Channel> = StepOfModule<Modules[C]>;
/** An element of a message's `flow`: exactly one property, named after its channel. */
export type FlowStep = { [C in Channel]: { [K in C]: StepOf<C> } }[Channel];
/** A flow step as its channel and object: narrowing on `channel` gives that channel's fields. */
export type ChannelStep = { [C in Channel]: { channel: C; config: StepOf<C> } }[Channel];
/** What a carrier is handed for one attempt: the common fields and its channel's own. */
export type OutboundAttempt = { [C in Channel]: AttemptOfModule<Modules[C]> }[Channel];

/** The module of a channel, typed for code that treats every channel alike. */
export function channelModule(channel: Channel): ChannelModule<Channel, StepBase, OutboundAttempt> {
  return CHANNEL_MODULES[channel] as unknown as ChannelModule<Channel, StepBase, OutboundAttempt>;
}

export function isChannel(name: string): name is Channel {
  return Object.hasOwn(CHANNEL_MODULES, name);
}

/** The channel and object of a flow step (stored flows were validated at acceptance). */
export function stepOf(step: FlowStep): ChannelStep {
  for (const channel in step) {
    return { channel, config: (step as Record<string, unknown>)[channel] } as ChannelStep;
  }
  throw new Error('a flow step without a channel');
}

/** The body a step object gives its channel, when it has one. */
export function stepBody(step: ChannelStep): string | undefined {
  return 'body' in step.config ? step.config.body : undefined;
}

export const familyOf = (channel: Channel): Family => CHANNEL_MODULES[channel].family;

/** The channels of a family (whatsapp: `whatsapp_text`, `whatsapp_template`). */
export function channelsOf(family: Family): Channel[] {
  return CHANNELS.filter((c) => CHANNEL_MODULES[c].family === family);
}

/** Key of the channel object in sentMessage events (`whatsapp_body` for `whatsapp_text`). */
export const eventKeyOf = (channel: Channel): string => CHANNEL_MODULES[channel].eventKey;

/** D3: a step succeeds at `sent` for SMS and at `delivered` (or `seen`) for the other channels. */
export function isStepSuccess(channel: Channel, state: AttemptState): boolean {
  if (state === 'delivered' || state === 'seen') {
    return true;
  }
  return state === 'sent' && CHANNEL_MODULES[channel].succeedsAt === 'sent';
}

/** One recipient's attempt at a step of `channel`. */
export function planAttempt(step: ChannelStep, input: PlanInput): Planned<OutboundAttempt> {
  return channelModule(step.channel).plan(step.config, input);
}

const CHANNEL_LIST = CHANNELS.join(', ').replace(/, ([^,]*)$/, ' or $1');

/** A `flow` element: exactly one property, one of the channels, checked by that channel's schema. */
export const flowStepSchema = Joi.object(Object.fromEntries(CHANNELS.map((c) => [c, CHANNEL_MODULES[c].schema])))
  .custom(worded((step: object) => (Object.keys(step).length === 1 ? null : `must have exactly one property: ${CHANNEL_LIST}`)));

export { FAMILIES, type AttemptState, type Family, type PlanInput, type AttemptBase } from './types.js';
export { DEFAULT_SMS_GATEWAY, SMS_GATEWAYS, smsGatewayOf, type SmsAttempt, type SmsGateway, type SmsStep } from './sms.js';
export type { ViberAttempt, ViberButton, ViberStep } from './viber.js';
export type { WhatsappTextAttempt, WhatsappTextStep } from './whatsapp-text.js';
export type { WhatsappTemplate, WhatsappTemplateAttempt, WhatsappTemplateStep } from './whatsapp-template.js';
export { MAX_BODY_CHARS, charLength } from './fields.js';
