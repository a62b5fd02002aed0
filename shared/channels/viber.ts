/** The `viber` channel (spec: `viber` channel object). */
import Joi from 'joi';
import { bodyText, httpUri, requiredSender, ttl, worded } from './fields.js';
import type { AttemptBase, ChannelModule, StepBase } from './types.js';
import { viberButtonTitleProblem } from '../carriers/viber/types.js';

export interface ViberButton { title: string; url: string }

/** The spec allows 100 characters; Viber shows at most 30, so a longer caption is refused at acceptance. */
const buttonTitle = Joi.string().min(1).max(100).custom(worded(viberButtonTitleProblem));

export interface ViberStep extends StepBase {
  body?: string;
  sender: string;
  buttons?: ViberButton[];
}

export interface ViberAttempt extends AttemptBase {
  channel: 'viber';
  /** The step's button (the spec allows one). */
  button?: ViberButton;
}

export const viber: ChannelModule<'viber', ViberStep, ViberAttempt> = {
  name: 'viber',
  family: 'viber',
  eventKey: 'viber',
  schema: Joi.object<ViberStep>({
    body: bodyText,
    sender: requiredSender(100),
    buttons: Joi.array().items(Joi.object({ title: buttonTitle.required(), url: httpUri.required() })).max(1),
    ttl,
  }),
  succeedsAt: 'delivered',
  needsBody: true,
  label: 'Viber',
  defaultSender: () => '',
  plan(step, input) {
    const b = input.base;
    const attempt: ViberAttempt = {
      attemptId: b.attemptId, recipientPublicId: b.recipientPublicId, accountId: b.accountId, to: b.to, sender: b.sender,
      text: input.text ?? '', ttlMinutes: b.ttlMinutes, channel: 'viber',
    };
    const button = step.buttons?.[0];
    if (button) attempt.button = button;
    return { attempt, count: 1 };
  },
};
