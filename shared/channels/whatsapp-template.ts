/** The `whatsapp_template` channel: a template registered and approved beforehand (spec, D2). */
import Joi from 'joi';
import { ttl } from './fields.js';
import type { AttemptBase, ChannelModule, StepBase } from './types.js';

export interface WhatsappTemplateStep extends StepBase {
  template_name: string;
  /** Optional (D2): the template's registered language when absent. */
  language?: string;
  params?: string[];
  params_header?: string[];
  params_buttons?: string[];
}

export interface WhatsappTemplate {
  templateName: string;
  language?: string;
  params?: string[];
  paramsHeader?: string[];
  paramsButtons?: string[];
}

export interface WhatsappTemplateAttempt extends AttemptBase {
  channel: 'whatsapp_template';
  template: WhatsappTemplate;
}

const stringList = Joi.array().items(Joi.string().max(1024)).max(100);
/** A button's parameter; an empty string skips a button that has none (a quick reply before a URL button). */
const buttonList = Joi.array().items(Joi.string().allow('').max(1024)).max(100);

export const whatsappTemplate: ChannelModule<'whatsapp_template', WhatsappTemplateStep, WhatsappTemplateAttempt> = {
  name: 'whatsapp_template',
  family: 'whatsapp',
  eventKey: 'whatsapp_template',
  schema: Joi.object<WhatsappTemplateStep>({
    template_name: Joi.string().min(1).max(100).required(),
    // The spec does not require a sender here; without one no sender row matches (D12).
    sender: Joi.string().min(1).max(64),
    language: Joi.string().min(2).max(15),
    params: stringList,
    params_header: stringList,
    params_buttons: buttonList,
    ttl,
  }),
  succeedsAt: 'delivered',
  needsBody: false,
  label: 'WhatsApp',
  defaultSender: () => '',
  plan(step, input) {
    const b = input.base;
    const template: WhatsappTemplate = { templateName: step.template_name };
    if (step.language !== undefined) template.language = step.language;
    if (step.params !== undefined) template.params = step.params;
    if (step.params_header !== undefined) template.paramsHeader = step.params_header;
    if (step.params_buttons !== undefined) template.paramsButtons = step.params_buttons;
    return {
      attempt: {
        attemptId: b.attemptId, recipientPublicId: b.recipientPublicId, accountId: b.accountId, to: b.to, sender: b.sender,
        // What the stored attempt and the sandbox show: the message's body, else the template's name.
        text: input.text ?? step.template_name, ttlMinutes: b.ttlMinutes, channel: 'whatsapp_template', template,
      },
      count: 1,
    };
  },
};
