/**
 * The XML API (`POST /xml`, D9): form fields `XMLDATA` and `apikey`. The document is checked whole
 * before anything is accepted; the first problem answers with its error ID.
 */
import { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { readFormBody, mediaType, BodyError } from '../middleware/body.js';
import { keyFromRequest } from '../middleware/api-key.js';
import { parseXmlRequest, MAX_XML_BYTES, type XmlRequest } from '../xml/parse.js';
import { presentXmlError, presentXmlSuccess } from '../xml/present.js';
import { payingBalance } from '../../shared/domain/payer.js';
import { acceptMessages } from '../../shared/sending/accept.js';
import { MAX_XML_RECIPIENTS } from '../../shared/sending/message-schema.js';
import { AppError } from '../../shared/errors.js';
import { knownError } from '../middleware/errors.js';
import type { ApiKeyRecord } from '../../shared/domain/keys.js';
import { requestLogger } from '../middleware/request-log.js';

/**
 * 901 is ours (D9 lists none for it): storage unavailable, nothing of the document was accepted,
 * retry after `Retry-After` seconds (issue 22).
 */
export const XML_UNAVAILABLE = 901;
const HTTP_OF_ERROR: Record<number, number> = { 103: 401, 105: 402, 900: 500, [XML_UNAVAILABLE]: 503 };

/** Url-encoded XMLDATA can be three times the document's size. */
const MAX_FORM_BYTES = MAX_XML_BYTES * 3 + 4096;

export function xmlRouter(ctx: AppContext): Router {
  const router = Router();
  const deps = { db: ctx.db, queues: ctx.queues, config: ctx.config, logger: ctx.logger };
  const fail = (res: Response, id: number) =>
    res.status(HTTP_OF_ERROR[id] ?? 400).type('application/xml').send(presentXmlError(id));

  router.post('/xml', async (req: Request, res: Response) => {
    let form: Record<string, string>;
    try {
      const read = mediaType(req) === 'application/x-www-form-urlencoded' ? await readFormBody(req, MAX_FORM_BYTES) : (req.resume(), null);
      if (read && read.badField !== null) {
        // A field that is not text in the form's character set (e.g. `%FD` without `charset=windows-1250`).
        return fail(res, 101);
      }
      form = read?.values ?? {};
    } catch (err) {
      if (err instanceof BodyError) {
        return fail(res, err.status === 413 ? 102 : 101);
      }
      throw err;
    }
    const parsed = parseXmlRequest(form.XMLDATA);
    if (!parsed.ok && (parsed.errorId === 101 || parsed.errorId === 102)) {
      return fail(res, parsed.errorId);
    }
    const key = await keyFromRequest(ctx.db, form.apikey, 'send');
    if (!key) {
      return fail(res, 103);
    }
    if (!(await hasPositiveBalance(ctx, key))) {
      return fail(res, 105);
    }
    if (!parsed.ok) {
      return fail(res, parsed.errorId);
    }
    try {
      const result = await acceptMessages(deps, key, parsed.requests.map(toMessage), { mode: 'batch', source: 'xml', atomic: true, maxRecipients: MAX_XML_RECIPIENTS });
      res.type('application/xml').send(presentXmlSuccess(result.recipients.map((r, i) => ({
        requestId: r.messageId,
        numbers: r.phones.map((phone, j) => phone ?? (parsed.requests[i]!.numbers[j] ?? '').replace(/\D/g, '')),
      }))));
    } catch (err) {
      if (err instanceof AppError && err.status === 400) {
        // The parser checks what the XML can carry; anything left is a value the message schema refuses.
        return fail(res, /sender/.test(err.message) ? 203 : /body/.test(err.message) ? 202 : 109);
      }
      throw err;
    }
  });
  router.use('/xml', xmlErrors(ctx, fail));
  return router;
}

function xmlErrors(ctx: AppContext, fail: (res: Response, id: number) => unknown): ErrorRequestHandler {
  return (caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof AppError && err.status === 503) {
      fail(res, XML_UNAVAILABLE);
      return;
    }
    if (err instanceof BodyError) {
      fail(res, err.status === 413 ? 102 : 101);
      return;
    }
    requestLogger(req, ctx.logger).error({ err }, 'XML call failed');
    fail(res, 900);
  };
}

/** D9: `lowcost` is `high` at promotional priority; `high` and `direct` travel in the transactional lane. */
function toMessage(r: XmlRequest): Record<string, unknown> {
  const sms: Record<string, unknown> = { gateway: r.type === 'direct' ? 'direct' : 'high' };
  if (r.sender !== undefined) {
    sms.sender = r.sender.replace(/^\+/, '');
  }
  return {
    body: r.text,
    to: r.numbers.map((n) => ({ phone_number: n })),
    flow: [{ sms }],
    tag: r.type === 'lowcost' ? 'promotional' : 'transactional',
  };
}

async function hasPositiveBalance(ctx: AppContext, key: ApiKeyRecord): Promise<boolean> {
  return (await payingBalance(ctx.db, key.id)) > 0;
}
