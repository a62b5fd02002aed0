/**
 * Joi validation with messages that name the field (`to[3].phone_number: must be a string`), for
 * the domain (message acceptance, admin operations) and the HTTP layer alike.
 */
import Joi from 'joi';
import { badRequest } from './errors.js';
import { findUnstorable } from './unstorable-text.js';

/**
 * An ISO 8601 instant within years 1970-9999. JavaScript dates reach ±275,760 years and
 * timestamptz only 4713 BC to 294276 AD, so an unbounded date could pass the schema and fail in
 * Postgres; no instant this service stores is outside these years.
 */
export const isoInstant = Joi.date().iso().min('1970-01-01T00:00:00Z').max('9999-12-31T23:59:59.999Z');

export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

/**
 * `<field path>: <what is wrong>` from the first Joi problem. `rootLabel` names the validated value
 * itself when the problem is at the top (the request body, or a message object of a batch).
 */
export function describeJoiError(error: Joi.ValidationError, rootLabel = 'body'): string {
  const detail = error.details[0];
  if (!detail) {
    return error.message;
  }
  const field = fieldPath(detail.path) || rootLabel;
  // Joi starts its messages with the quoted label; strip exactly that label (a property name
  // taken from the input may itself contain a quote), then any other leading quoted label.
  const label = detail.context?.label;
  let what = detail.message;
  if (typeof label === 'string' && what.startsWith(`"${label}"`)) {
    what = what.slice(label.length + 2).trimStart() || 'is invalid';
  } else {
    what = what.replace(/^"[^"]*" /, '').replace(/^"[^"]*"$/, 'is invalid');
  }
  return `${field}: ${what}`;
}

/**
 * The problem to report of a value `schema` refused (`error`, found with `abortEarly`): an unknown
 * property when the value has one, else the first problem. A misspelt field (`prefx`, `phone`) is
 * then named as the one not allowed, rather than reported as its right spelling missing. Runs only
 * on a refused value: the value is validated again to see all its problems.
 */
export function mostTellingError(schema: Joi.Schema, value: unknown, opts: Joi.ValidationOptions, error: Joi.ValidationError): Joi.ValidationError {
  if (error.details[0]?.type === 'object.unknown') return error;
  const all = schema.validate(value, { ...opts, abortEarly: false }).error;
  const unknown = all?.details.find((d) => d.type === 'object.unknown');
  return unknown ? new Joi.ValidationError(unknown.message, [unknown], value) : error;
}

/**
 * Validate and return the typed value, or throw a 400 AppError naming the field. Every string of
 * the value is also checked once here, whatever the schema: Postgres refuses NUL characters in
 * text, and nothing a client sends may reach it in a form that makes it fail.
 */
export function validate<T>(schema: Joi.Schema<T>, value: unknown, opts: Joi.ValidationOptions = {}): T {
  const options = { abortEarly: true, convert: false, ...opts };
  const result = schema.validate(value, options);
  if (result.error) {
    const error = options.abortEarly ? mostTellingError(schema, value, options, result.error) : result.error;
    throw badRequest(describeJoiError(error), 'VALIDATION', { field: fieldPath(error.details[0]?.path ?? []) });
  }
  const unstorable = findUnstorable(result.value, '');
  if (unstorable !== null) {
    throw badRequest(unstorable, 'VALIDATION', { field: unstorable.slice(0, unstorable.indexOf(':')) });
  }
  return result.value as T;
}
