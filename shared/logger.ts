/** Structured JSON logs. Keys and secrets are redacted wherever they appear in a logged object. */
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

const REDACT = [
  'apiKey', 'api_key', 'apikey', 'key', 'secret', 'password', 'token', 'code', 'proof',
  'authorization', 'webhook_secret', 'verification_secret',
  '*.apiKey', '*.api_key', '*.apikey', '*.secret', '*.password', '*.token', '*.code', '*.proof',
  '*.authorization', '*.webhook_secret', '*.verification_secret',
  'req.headers["x-api-key"]', 'req.headers.authorization', 'headers["x-api-key"]', 'headers.authorization',
];

/** `destination`: where lines go (default stdout); tests pass a stream to read what was logged. */
export function createLogger(level: string, name = 'switchboard', destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: { paths: REDACT, censor: '[redacted]' },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
