/**
 * Verification API (D8): start a validation, check a code, read a session, check a proof against
 * the stored session, and check a proof offline (the only call without a key). Handlers read and
 * shape the input; shared/verification/service.ts does the work. Every error answers
 * `{error, message}` (+ `attemptsRemaining` on code errors, `Retry-After` on rate limits).
 */
import { Router, type ErrorRequestHandler, type Request } from 'express';
import type { AppContext } from '../context.js';
import { readJsonBody, BodyError } from '../middleware/body.js';
import { headerKey } from '../middleware/api-key.js';
import { AppError, notFound } from '../../shared/errors.js';
import { knownError, refuseNulInPath } from '../middleware/errors.js';
import { authenticateKey, keyAllows, type ApiKeyRecord } from '../../shared/domain/keys.js';
import { VerificationService, PHONE_PATTERN } from '../../shared/verification/service.js';
import {
  VerificationError, invalidApiKey, invalidPhone, invalidRequest, missingApiKey, missingField,
} from '../../shared/verification/errors.js';
import { requestLogger } from '../middleware/request-log.js';

/** The JSON body as an object, or INVALID_REQUEST. */
async function readObject(req: Request): Promise<Record<string, unknown>> {
  const body = await readJsonBody(req);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('Request body must be a JSON object');
  }
  return body as Record<string, unknown>;
}

/** A required string field: MISSING_FIELD when absent or null, INVALID_REQUEST when not a string. */
function stringField(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  if (value === undefined || value === null) {
    throw missingField(name);
  }
  if (typeof value !== 'string') {
    throw invalidRequest(`${name} must be a string`);
  }
  return value;
}

/** phoneNumber: MISSING_FIELD when absent, INVALID_PHONE for anything but `^[1-9]\d{6,14}$` (numbers included). */
function phoneField(body: Record<string, unknown>): string {
  const value = body.phoneNumber;
  if (value === undefined || value === null) {
    throw missingField('phoneNumber');
  }
  if (typeof value !== 'string' || !PHONE_PATTERN.test(value)) {
    throw invalidPhone();
  }
  return value;
}

export function verifyRouter(ctx: AppContext): Router {
  const { largeCalls } = ctx;
  const router = Router();
  const service = new VerificationService(ctx);

  const auth = async (req: Request): Promise<ApiKeyRecord> => {
    const presented = headerKey(req);
    if (presented === undefined) {
      throw missingApiKey();
    }
    const key = await authenticateKey(ctx.db, presented);
    if (!key || !keyAllows(key.scope, 'send')) {
      throw invalidApiKey();
    }
    return key;
  };
  const tokenParam = (req: Request): string => String(req.params.token ?? '');
  router.use('/v1/validations', refuseNulInPath);

  router.post('/v1/validations', async (req, res) => {
    largeCalls.smallCall(); // an OTP: large send calls give way (api/routes/send.ts)
    const key = await auth(req);
    const body = await readObject(req);
    res.json(await service.start(key, phoneField(body)));
  });

  router.get('/v1/validations/:token', async (req, res) => {
    const key = await auth(req);
    res.json(await service.get(key, tokenParam(req)));
  });

  router.post('/v1/validations/:token/verify', async (req, res) => {
    const key = await auth(req);
    const body = await readObject(req);
    res.json(await service.verify(key, tokenParam(req), stringField(body, 'code')));
  });

  router.patch('/v1/validations/:token', async (req, res) => {
    const key = await auth(req);
    const body = await readObject(req);
    res.json(await service.checkStoredProof(key, tokenParam(req), stringField(body, 'proof')));
  });

  // No key: the HMAC proof is the credential (Authentication 5).
  router.post('/v1/verify-proof', async (req, res) => {
    const body = await readObject(req);
    const phoneNumber = phoneField(body);
    const input = {
      phoneNumber,
      token: stringField(body, 'token'),
      code: stringField(body, 'code'),
      timestamp: stringField(body, 'timestamp'),
      proof: stringField(body, 'proof'),
    };
    res.json(await service.checkProofOffline(input));
  });

  // Any other path or method of this API: a 404 in its own error shape (it was Express's `{message}`).
  router.use(['/v1/validations', '/v1/verify-proof'], (_req, _res, next) => next(notFound('No such endpoint of the verification API')));
  router.use(verifyErrors(ctx));
  return router;
}

function verifyErrors(ctx: AppContext): ErrorRequestHandler {
  return (caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof VerificationError) {
      res.set(err.headers).status(err.status).json({ error: err.code, message: err.message, ...err.extra });
      return;
    }
    if (err instanceof BodyError) {
      res.status(err.status).json({ error: err.status === 413 ? 'PAYLOAD_TOO_LARGE' : 'INVALID_REQUEST', message: err.message });
      return;
    }
    if (err instanceof AppError && err.status === 400 && err.code === 'BAD_REQUEST') {
      // A malformed %-escape in the path (knownError): this API's code for a request it cannot read.
      res.status(400).json({ error: 'INVALID_REQUEST', message: err.message });
      return;
    }
    if (err instanceof AppError && (err.status < 500 || err.status === 503)) {
      res.status(err.status).json({ error: err.code, message: err.message });
      return;
    }
    const status = (err as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      // Any other client error Express itself raises.
      res.status(400).json({ error: 'INVALID_REQUEST', message: 'Malformed request' });
      return;
    }
    requestLogger(req, ctx.logger).error({ err: (err as Error)?.message }, 'verification API call failed');
    res.status(500).json({ error: 'INTERNAL_ERROR', message: 'Internal error; retry after a short delay' });
  };
}
