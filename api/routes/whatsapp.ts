/**
 * WhatsApp partner onboarding (D7): thin handlers over `shared/whatsapp/onboarding`.
 *
 * REST (`x-api-key`, answers `{success, …}`, failures `{success: false, message}`: 400 naming the
 * fields, 401 for a missing/unknown/disabled key, 403 for a sub-key starting a signup, 404 for a
 * WABA of another account, 502 when Graph refused a refresh, 503 when onboarding is not configured):
 *   POST /v1/whatsapp/signup, /v1/whatsapp/accounts/list, /v1/whatsapp/phone_numbers/list,
 *   /v1/whatsapp/templates/list.
 * The hosted page: GET /whatsapp/onboarding?token=… (HTML; a bad or expired token gets an HTML error
 * page, never a stack trace) and the page's call POST /whatsapp/onboarding/complete (JSON).
 */
import { randomBytes } from 'node:crypto';
import { Router, type ErrorRequestHandler, type Request, type Response } from 'express';
import type { AppContext } from '../context.js';
import { readJsonBody } from '../middleware/body.js';
import { restErrors, restKey } from './rest.js';
import { AppError } from '../../shared/errors.js';
import { OnboardingUnavailableError } from '../../shared/whatsapp/onboarding/connection.js';
import { SignupTokenError } from '../../shared/whatsapp/onboarding/token.js';
import { ONBOARDING_PAGE_PATH, openPage, startSignup, type OnboardingDeps } from '../../shared/whatsapp/onboarding/signup.js';
import { cancelSignup, finishSignup, parseCompletion, StepError } from '../../shared/whatsapp/onboarding/complete.js';
import { listAccounts, listPhoneNumbers, listWabaTemplates } from '../../shared/whatsapp/onboarding/lists.js';
import { errorPageCsp, loginOptions, pageHeaders, pagePolicy } from '../../shared/whatsapp/onboarding/page.js';
import { renderErrorPage, renderOnboardingPage, type ErrorPageModel } from './whatsapp-page.js';

const REST = ['/v1/whatsapp/signup', '/v1/whatsapp/accounts/list', '/v1/whatsapp/phone_numbers/list', '/v1/whatsapp/templates/list'];
const COMPLETE_PATH = `${ONBOARDING_PAGE_PATH}/complete`;

/** The body of a list call: none at all counts as `{}`. */
async function optionalJson(req: Request): Promise<unknown> {
  const length = req.headers['content-length'];
  if ((length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined) return undefined;
  return readJsonBody(req);
}

export function whatsappRouter(ctx: AppContext): Router {
  const router = Router();
  const deps: OnboardingDeps = {
    db: ctx.db, box: ctx.secrets, queues: ctx.queues, logger: ctx.logger, config: ctx.config,
    webhookRetries: ctx.config.webhookRetryScheduleMs.length,
  };

  router.post('/v1/whatsapp/signup', async (req, res) => {
    const key = await restKey(ctx, req);
    const body = await readJsonBody(req);
    res.json({ success: true, ...(await startSignup(deps, key, body)) });
  });
  router.post('/v1/whatsapp/accounts/list', async (req, res) => {
    const key = await restKey(ctx, req);
    res.json({ success: true, accounts: await listAccounts(deps, key, await optionalJson(req)) });
  });
  router.post('/v1/whatsapp/phone_numbers/list', async (req, res) => {
    const key = await restKey(ctx, req);
    res.json({ success: true, phone_numbers: await listPhoneNumbers(deps, key, await optionalJson(req)) });
  });
  router.post('/v1/whatsapp/templates/list', async (req, res) => {
    const key = await restKey(ctx, req);
    res.json({ success: true, templates: await listWabaTemplates(deps, key, await optionalJson(req)) });
  });
  router.all(REST, (req, res) => {
    req.resume();
    res.status(405).json({ success: false, message: `Method ${req.method} is not allowed on ${req.path}` });
  });
  router.use(REST, jsonErrors(ctx));

  router.get(ONBOARDING_PAGE_PATH, async (req, res) => {
    const view = await openPage(deps, req.query.token);
    const { signup, connection } = view;
    if (signup.status === 'completed') {
      sendErrorPage(res, 200, {
        title: 'WhatsApp is already connected',
        message: `This sign-up was completed. You can go back to ${signup.partnerName}.`,
        link: { href: signup.partnerFinishUrl, text: `Back to ${signup.partnerName}` },
      });
      return;
    }
    const policy = pagePolicy({ sdkUrl: ctx.config.whatsappSdkUrl, logoUrl: signup.partnerLogo });
    const nonce = randomBytes(18).toString('base64');
    res.status(200).set({ ...pageHeaders(policy.csp(nonce)), 'content-type': 'text/html; charset=utf-8' }).send(renderOnboardingPage({
      token: String(req.query.token), partnerName: signup.partnerName, partnerLogo: signup.partnerLogo, partnerFinishUrl: signup.partnerFinishUrl,
      appId: connection.appId, graphVersion: connection.graphVersion, loginOptions: loginOptions(signup, connection.signupConfigId),
      completeUrl: COMPLETE_PATH, policy,
    }, nonce));
  });
  router.all(ONBOARDING_PAGE_PATH, (req, res) => {
    req.resume();
    sendErrorPage(res, 405, { title: 'Not allowed', message: `Method ${req.method} is not allowed here.` });
  });
  router.use(ONBOARDING_PAGE_PATH, pageErrors(ctx));

  router.post(COMPLETE_PATH, async (req, res) => {
    const input = parseCompletion(await readJsonBody(req));
    res.set('cache-control', 'no-store');
    if (input.event === 'CANCEL') {
      await cancelSignup(deps, input);
      res.json({ success: true });
      return;
    }
    res.json({ success: true, ...(await finishSignup(deps, input)) });
  });
  router.all(COMPLETE_PATH, (req, res) => {
    req.resume();
    res.status(405).json({ success: false, message: `Method ${req.method} is not allowed on ${req.path}` });
  });
  router.use(COMPLETE_PATH, jsonErrors(ctx));
  return router;
}

function sendErrorPage(res: Response, status: number, page: ErrorPageModel): void {
  const nonce = randomBytes(18).toString('base64');
  res.status(status).set({ ...pageHeaders(errorPageCsp(nonce)), 'content-type': 'text/html; charset=utf-8' }).send(renderErrorPage(page, nonce));
}

/**
 * `{success: false, message}` as the REST API answers (plus `step` for a failed onboarding step);
 * onboarding's own 5xx (Graph refused, not configured) keep their words, they hold no internals.
 */
function jsonErrors(ctx: AppContext): ErrorRequestHandler {
  const rest = restErrors(ctx);
  return (err, req, res, next) => {
    if (err instanceof StepError) {
      res.status(err.status).json({ success: false, message: err.message, step: err.step });
    } else if (err instanceof SignupTokenError) {
      res.status(401).json({ success: false, message: err.reason === 'expired' ? 'The onboarding link has expired' : 'The onboarding token is not valid' });
    } else if (err instanceof AppError && err.status >= 500) {
      res.status(err.status).json({ success: false, message: err.message });
    } else {
      rest(err, req, res, next);
    }
  };
}

/** The page's failures as HTML pages that say what to do. */
function pageErrors(ctx: AppContext): ErrorRequestHandler {
  return (err, _req, res, _next) => {
    if (err instanceof SignupTokenError) {
      sendErrorPage(res, err.reason === 'expired' ? 410 : 401, err.reason === 'expired'
        ? { title: 'This link has expired', message: 'Links to connect WhatsApp are valid for one hour. Ask the service that sent you here for a new link.' }
        : { title: 'This link is not valid', message: 'The link to connect WhatsApp is incomplete or was changed. Open the link exactly as you received it, or ask for a new one.' });
      return;
    }
    if (err instanceof OnboardingUnavailableError) {
      ctx.logger.warn({ err: err.message }, 'WhatsApp onboarding page without a connection');
      sendErrorPage(res, 503, { title: 'WhatsApp sign-up is not available', message: 'The service is not set up for WhatsApp sign-up at the moment. Please try again later.' });
      return;
    }
    ctx.logger.error({ err }, 'WhatsApp onboarding page failed');
    sendErrorPage(res, 500, { title: 'Something went wrong', message: 'The page could not be shown. Please try again in a moment.' });
  };
}
