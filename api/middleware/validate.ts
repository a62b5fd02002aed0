/** Joi validation with messages that name the field (`to[3].phone_number: must be a string`). */
import type Joi from 'joi';
import { badRequest } from '../../shared/errors.js';

export function fieldPath(path: ReadonlyArray<string | number>): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

/** `<field path>: <what is wrong>` from the first Joi problem. */
export function describeJoiError(error: Joi.ValidationError): string {
  const detail = error.details[0];
  if (!detail) {
    return error.message;
  }
  const field = fieldPath(detail.path) || 'body';
  const what = detail.message.replace(/^"[^"]*" /, '').replace(/^"[^"]*"$/, 'is invalid');
  return `${field}: ${what}`;
}

/** Validate and return the typed value, or throw a 400 AppError naming the field. */
export function validate<T>(schema: Joi.Schema<T>, value: unknown, opts: Joi.ValidationOptions = {}): T {
  const result = schema.validate(value, { abortEarly: true, convert: false, ...opts });
  if (result.error) {
    throw badRequest(describeJoiError(result.error), 'VALIDATION', { field: fieldPath(result.error.details[0]?.path ?? []) });
  }
  return result.value as T;
}
