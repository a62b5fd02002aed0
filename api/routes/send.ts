/**
 * The sending API: JSON v2 (`/v2/message`, `/v2/messages`), the simple endpoints and legacy JSON
 * v1 (`POST /v1/messages`). Handlers only authenticate, read the body, call `acceptMessages` and
 * present its result in the endpoint's shape (D2, D9).
 */
import { randomUUID } from 'node:crypto';
import { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { readJsonBytes, parseJsonDocument, readFormBody, mediaType, BodyError } from '../middleware/body.js';
import { formDecoder, parseForm, type FormDecoder, type ParsedForm } from '../middleware/form.js';
import { TurnsFullError } from '../../shared/semaphore.js';
import { headerKey, keyFromRequest } from '../middleware/api-key.js';
import { acceptMessages, type AcceptMode, type AcceptResult, type MessageSource } from '../../shared/sending/accept.js';
import { callFingerprint, idempotencyKeyProblem, type CallIdempotency } from '../../shared/sending/idempotency.js';
import { MAX_OBJECTS } from '../../shared/sending/message-schema.js';
import { AppError } from '../../shared/errors.js';
import { knownError } from '../middleware/errors.js';
import type { ApiKeyRecord } from '../../shared/domain/keys.js';
import { requestLogger } from '../middleware/request-log.js';

/** D2: the exact text for a missing, unknown, revoked or disabled key (HTTP 400, not 401). */
export const NOT_AUTHORIZED = 'User is not authorized to access this resource with an explicit deny';

/** A call body larger than this takes turns with the other large ones (see `largeCalls`). */
const LARGE_CALL_BYTES = 2048;

/** A simple call's parameter whose percent-escapes (or bytes) are not text in its character set. */
const NOT_TEXT = 'is not valid text in the request\'s character set (UTF-8 unless the Content-Type names another)';
const utf8Form = formDecoder(null) as FormDecoder;

class SendError extends Error {
  constructor(readonly status: number, message: string, readonly body?: Record<string, unknown>) {
    super(message);
  }
}

export function sendRouter(ctx: AppContext): Router {
  const { largeCalls } = ctx;
  const router = Router();
  const deps = { db: ctx.db, queues: ctx.queues, config: ctx.config, logger: ctx.logger };

  const auth = async (presented: string | undefined): Promise<ApiKeyRecord> => {
    const key = await keyFromRequest(ctx.db, presented, 'send');
    if (!key) {
      throw new SendError(400, NOT_AUTHORIZED);
    }
    return key;
  };

  // Large calls take turns from parsing to enqueueing, a few at a time: the CPU work of a burst of
  // them (parsing and checking hundreds of recipients each) then never queues up in this process's
  // event loop in front of a small call (an OTP), which skips the turns and tells `largeCalls` it
  // came (fewer turns while small calls come: shared/sending/large-call-turns.ts). The bytes are
  // read first, outside the turns, so a slow upload holds no turn. The bodies waiting are bounded
  // (ACCEPT_LARGE_CALL_BACKLOG_MB): beyond that a call is refused at once with 429 and
  // Retry-After, before anything is accepted, instead of queueing without limit.
  const batch = (source: MessageSource, camel: boolean) => async (req: Request, res: Response) => {
    const key = await auth(headerKey(req));
    const raw = await readJsonBytes(req);
    const idempotency = idempotencyOf(req, raw);
    const accept = async () => {
      if (req.socket.destroyed) {
        // The client gave up while the call waited for its turn: nothing is accepted, so that its
        // retry cannot become a second send. No one is left to read an answer.
        throw new SendError(499, 'Client closed the request before it was accepted');
      }
      const { value: body, payloads } = parseJsonDocument(raw);
      if (!Array.isArray(body)) {
        throw new SendError(400, 'Request body must be a JSON array of message objects');
      }
      if (body.length < 1 || body.length > MAX_OBJECTS) {
        throw new SendError(400, `Request body must hold 1 to ${MAX_OBJECTS} message objects (got ${body.length})`);
      }
      return acceptMessages(deps, key, body, { mode: 'batch', source, rawPayloads: payloads, ...(idempotency && { idempotency }) });
    };
    const large = raw.length > LARGE_CALL_BYTES;
    if (!large) largeCalls.smallCall();
    const result = await (large ? largeCalls.run(raw.length, accept) : accept());
    markReplayed(res, result);
    res.json(camel
      ? {
          requestId: result.requestId,
          accepted: result.accepted.map((a) => ({ key: a.key, messageId: a.messageId })),
          rejected: result.rejected.map((r) => ({ key: r.key, message: r.message })),
        }
      : { request_id: result.requestId, accepted: result.accepted.map((a) => ({ key: a.key, message_id: a.messageId })), rejected: result.rejected });
  };

  router.post('/v2/messages', batch('v2', false));
  router.post('/v1/messages', batch('v1', true));

  router.post('/v2/message', async (req, res) => {
    largeCalls.smallCall();
    const key = await auth(headerKey(req));
    const raw = await readJsonBytes(req);
    const idempotency = idempotencyOf(req, raw);
    const { value: body, payloads } = parseJsonDocument(raw);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new SendError(400, 'Request body must be one message object');
    }
    const result = await acceptMessages(deps, key, [body], { mode: 'single', source: 'v2', rawPayloads: payloads, ...(idempotency && { idempotency }) });
    markReplayed(res, result);
    res.json({ request_id: result.requestId, accepted: result.accepted.map((a) => ({ key: a.key, message_id: a.messageId })), rejected: [] });
  });

  // Simple endpoints (D9): one recipient, flat parameters.
  const simple = async (req: Request, res: Response, { values: params, badField }: ParsedForm, presented: string | undefined) => {
    largeCalls.smallCall();
    const key = await auth(presented);
    if (badField !== null) {
      res.status(400).json({ request_id: randomUUID(), accepted: false, message: `${badField}: ${NOT_TEXT}` });
      return;
    }
    const mode: AcceptMode = 'single';
    const message = simpleToMessage(params);
    try {
      const result = await acceptMessages(deps, key, [message], { mode, source: 'simple' });
      res.json({ request_id: result.requestId, message_id: result.accepted[0]!.messageId, accepted: true });
    } catch (err) {
      if (err instanceof AppError && err.status === 400) {
        res.status(400).json({ request_id: randomUUID(), accepted: false, message: translateSimpleField(err.message) });
        return;
      }
      throw err;
    }
  };
  // Express answers HEAD with the GET handler, which would send (and charge) a message for a
  // link checker's or a monitor's HEAD. Sending is what GET and POST do; HEAD does nothing.
  router.head('/v2/simple/message', (_req, res) => {
    res.status(405).set('Allow', 'GET, POST').end();
  });
  router.get('/v2/simple/message', async (req, res) => {
    // The query as sent (all after the first `?`), decoded strictly (form.ts), not Express's parse of it.
    const at = req.originalUrl.indexOf('?');
    const query = parseForm(Buffer.from(at < 0 ? '' : req.originalUrl.slice(at + 1), 'latin1'), utf8Form);
    await simple(req, res, query, headerKey(req) ?? query.values.apikey);
  });
  router.post('/v2/simple/message', async (req, res) => {
    if (mediaType(req) !== 'application/x-www-form-urlencoded') {
      req.resume();
      res.status(415).json({ message: 'Unsupported Media Type' });
      return;
    }
    await simple(req, res, await readFormBody(req), headerKey(req));
  });

  router.use(sendErrors(ctx));
  return router;
}

/**
 * The call's `Idempotency-Key` header (issue 27), with the fingerprint of the request it names:
 * its endpoint and its body bytes. A malformed key is a whole-request failure.
 */
function idempotencyOf(req: Request, raw: Buffer): CallIdempotency | undefined {
  const value = req.headers['idempotency-key'];
  if (value === undefined) {
    return undefined;
  }
  const key = Array.isArray(value) ? value.join(', ') : value;
  const problem = idempotencyKeyProblem(key);
  if (problem !== null) {
    throw new SendError(400, problem);
  }
  return { key, fingerprint: callFingerprint(`${req.method} ${req.path}`, raw) };
}

/** A repeated call answered from its key's stored answer says so (as Stripe's `Idempotent-Replayed`). */
function markReplayed(res: Response, result: AcceptResult): void {
  if (result.replayed) {
    res.set('Idempotent-Replayed', 'true');
  }
}

/** D9 parameters → a v2 message object (aliases: number, body, time; customID kept as payload.customID). */
export function simpleToMessage(p: Record<string, string | undefined>): Record<string, unknown> {
  const phone = p.phone_number ?? p.number;
  const text = p.message ?? p.body;
  const when = p.datetime ?? p.time;
  const sms: Record<string, unknown> = {};
  if (p.sender !== undefined && p.sender !== '') {
    sms.sender = p.sender;
  }
  if (p.gateway !== undefined && p.gateway !== '') {
    sms.gateway = p.gateway;
  }
  return {
    ...(text !== undefined && { body: text }),
    to: phone === undefined ? undefined : [{ phone_number: phone }],
    flow: [{ sms }],
    ...(when !== undefined && when !== '' && { datetime: when }),
    ...(p.customID !== undefined && { payload: { customID: p.customID } }),
  };
}

/** Name the simple endpoint's own parameters in errors (`to[0].phone_number` → `phone_number`). */
function translateSimpleField(message: string): string {
  return message
    .replace(/^body: is required unless .*$/, 'message: is required')
    .replace(/^to\[0\]\.phone_number/, 'phone_number')
    .replace(/^to:/, 'phone_number:')
    .replace(/^body:/, 'message:')
    .replace(/^flow\[0\]\.sms\./, '');
}

export function sendErrors(ctx: AppContext): ErrorRequestHandler {
  return (caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof SendError) {
      res.status(err.status).json({ Message: err.message });
      return;
    }
    if (err instanceof TurnsFullError) {
      // Overloaded with large calls: nothing of this one was accepted, a retry is safe.
      res.status(429).set('Retry-After', '1').json({ Message: 'Too many large requests are waiting; retry in a moment' });
      return;
    }
    if (err instanceof BodyError) {
      // D2: every whole-request failure, size included, is HTTP 400 with a specific Message.
      res.status(400).json({ Message: err.message });
      return;
    }
    if (err instanceof AppError && (err.status < 500 || err.status === 503)) {
      res.status(err.status).json({ Message: err.message });
      return;
    }
    requestLogger(req, ctx.logger).error({ err }, 'sending API call failed');
    res.status(500).json({ Message: 'Internal server error' });
  };
}
