/**
 * Structured JSON logs. Keys and secrets are redacted wherever they appear in a logged object,
 * by name: `code` is not among the names, because error codes (`err.code`: ECONNREFUSED, a
 * Postgres SQLSTATE) are what an operator needs to read; the one-time codes of verification are
 * never logged (their copies are sealed), and `otp`/`verificationCode` are redacted should one be.
 */
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

const SECRET_NAMES = [
  'apiKey', 'api_key', 'apikey', 'key', 'secret', 'password', 'token', 'proof', 'otp', 'verificationCode',
  'authorization', 'webhook_secret', 'verification_secret', 'credentials', 'credentialsKey',
];

export const REDACT_PATHS = [
  ...SECRET_NAMES,
  ...SECRET_NAMES.map((name) => `*.${name}`),
  'req.headers["x-api-key"]', 'req.headers.authorization', 'headers["x-api-key"]', 'headers.authorization',
];

/** `destination`: where lines go (default stdout); tests pass a stream to read what was logged. */
export function createLogger(level: string, name = 'switchboard', destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
