/** Errors of the verification API: `{error, message}` plus extras (attemptsRemaining) and headers (Retry-After). */
import { AppError } from '../errors.js';

export class VerificationError extends AppError {
  constructor(
    status: number,
    code: string,
    message: string,
    extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(status, code, message, extra);
    this.name = 'VerificationError';
  }
}

export const missingField = (field: string) => new VerificationError(400, 'MISSING_FIELD', `${field} is required`);
export const invalidRequest = (message: string) => new VerificationError(400, 'INVALID_REQUEST', message);
export const invalidPhone = () =>
  new VerificationError(400, 'INVALID_PHONE', 'phoneNumber must be digits only with the country code (^[1-9]\\d{6,14}$)');
/** A number of the right shape that is no possible number of its country code (docs/verification.md). */
export const impossiblePhone = () =>
  new VerificationError(400, 'INVALID_PHONE', 'phoneNumber is not a possible number for its country code');
export const validationNotFound = () => new VerificationError(404, 'NOT_FOUND', 'Validation not found');
export const missingApiKey = () => new VerificationError(401, 'MISSING_API_KEY', 'Header X-API-Key is required');
export const invalidApiKey = () => new VerificationError(401, 'INVALID_API_KEY', 'API key is invalid or disabled');
export const insufficientCredit = () => new VerificationError(402, 'INSUFFICIENT_CREDIT', 'Insufficient credit');
export const tooManyAttempts = () => new VerificationError(429, 'TOO_MANY_ATTEMPTS', 'Too many attempts', { attemptsRemaining: 0 });
export const expired = () => new VerificationError(400, 'EXPIRED', 'Validation expired');
export const invalidCode = (attemptsRemaining: number) =>
  new VerificationError(400, 'INVALID_CODE', 'Invalid code', { attemptsRemaining });
export const rateLimited = (code: 'TENANT_RATE_LIMIT' | 'PHONE_RATE_LIMIT', retryAfterS: number) =>
  new VerificationError(429, code,
    code === 'TENANT_RATE_LIMIT' ? 'Too many validations started for this account' : 'Too many validations started for this phone number',
    {}, { 'Retry-After': String(retryAfterS) });
