/** The `whatsapp_text` channel: free text inside the 24-hour customer-service window (spec, D3). */
import Joi from 'joi';
import { bodyText, requiredSender, ttl } from './fields.js';
import type { AttemptBase, ChannelModule, StepBase } from './types.js';

export interface WhatsappTextStep extends StepBase {
  body?: string;
  /** The phone number id of a registered WhatsApp number. */
  sender: string;
}

export interface WhatsappTextAttempt extends AttemptBase {
  channel: 'whatsapp_text';
}

export const whatsappText: ChannelModule<'whatsapp_text', WhatsappTextStep, WhatsappTextAttempt> = {
  name: 'whatsapp_text',
  family: 'whatsapp',
  // The spec names this channel's object in events `whatsapp_body`.
  eventKey: 'whatsapp_body',
  schema: Joi.object<WhatsappTextStep>({
    body: bodyText,
    sender: requiredSender(64),
    ttl,
  }),
  succeedsAt: 'delivered',
  needsBody: true,
  label: 'WhatsApp',
  defaultSender: () => '',
  plan(_step, input) {
    const b = input.base;
    return {
      attempt: {
        attemptId: b.attemptId, recipientPublicId: b.recipientPublicId, accountId: b.accountId, to: b.to, sender: b.sender,
        text: input.text ?? '', ttlMinutes: b.ttlMinutes, channel: 'whatsapp_text',
      },
      count: 1,
    };
  },
};
