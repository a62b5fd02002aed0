/** Schema pieces the channel modules share. */
import Joi from 'joi';
import { checkHttpUrl } from '../net/ssrf.js';

export const MAX_BODY_CHARS = 1000;

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

/** A message or step body: 1..1000 characters. */
export const bodyText = Joi.string().min(1).custom((value: string, helpers) =>
  charLength(value) > MAX_BODY_CHARS ? helpers.error('string.maxChars', { limit: MAX_BODY_CHARS }) : value)
  .messages({ 'string.maxChars': 'must be at most {#limit} characters long' });

/** A step's time to live in minutes (at most a week). */
export const ttl = Joi.number().integer().min(1).max(7 * 24 * 60);

// Joi's uri() takes `http://%zz/` and port 99999; the service's HTTP client parses URLs with
// WHATWG URL, so that is the check that decides (checkHttpUrl).
export const httpUri = Joi.string().max(2048).uri({ scheme: ['http', 'https'] }).custom((value: string, helpers) => {
  const check = checkHttpUrl(value);
  return check.ok ? value : helpers.error('string.httpUrl', { reason: check.reason });
}).messages({ 'string.httpUrl': '{#reason}' });

/** A step's sender that the spec requires (a registered name, a phone number id). */
export const requiredSender = (max: number) => Joi.string().min(1).max(max).required();
