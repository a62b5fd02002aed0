/** Schema pieces the channel modules share. */
import Joi from 'joi';
import { checkHttpUrl } from '../net/ssrf.js';

export const MAX_BODY_CHARS = 1000;

/**
 * A Joi rule that words its own error: `check` returns what is wrong (`must be …`), or null.
 *
 * The message schemas are validated once per message object, so their rules say what is wrong
 * this way rather than with `.messages()`: Joi merges a schema's own preferences (`.messages()` is
 * one) into the validation options each time it validates that schema, an absent key included,
 * about 1.5 µs a schema (docs/benchmarks.md, "The seams (issue 21)"); a worded rule costs nothing
 * until it fails. The error's text is exactly `problem` (no label: `describeJoiError` adds the path).
 */
export function worded<T>(check: (value: T) => string | null): Joi.CustomValidator<T> {
  return (value, helpers) => {
    const problem = check(value);
    return problem === null ? value : helpers.message({ custom: '{#problem}' }, { problem });
  };
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

/** A message or step body: 1..1000 characters. */
export const bodyText = Joi.string().min(1).custom(worded((value: string) =>
  charLength(value) > MAX_BODY_CHARS ? `must be at most ${MAX_BODY_CHARS} characters long` : null));

/** The longest time to live a step may have, in minutes: a week. */
export const MAX_TTL_MINUTES = 7 * 24 * 60;

/** A step's time to live in minutes (at most a week). */
export const ttl = Joi.number().integer().min(1).max(MAX_TTL_MINUTES);

// Joi's uri() takes `http://%zz/` and port 99999; the service's HTTP client parses URLs with
// WHATWG URL, so that is the check that decides (checkHttpUrl).
export const httpUri = Joi.string().max(2048).uri({ scheme: ['http', 'https'] }).custom(worded((value: string) => {
  const check = checkHttpUrl(value);
  return check.ok ? null : check.reason;
}));

/** A step's sender that the spec requires (a registered name, a phone number id). */
export const requiredSender = (max: number) => Joi.string().min(1).max(max).required();
