/**
 * Meta's webhooks for one WhatsApp connection, at `/callbacks/whatsapp/<connection>` (D12):
 *
 * - `GET`: the verification handshake; 200 with `hub.challenge` when `hub.verify_token` is the
 *   connection's `verify_token`, else 403.
 * - `POST`: `X-Hub-Signature-256` is checked over the raw bytes with the connection's
 *   `app_secret` before anything is parsed: a bad or missing one is 401, a body that is not Meta's
 *   envelope 400, and nothing is applied either way. Statuses become reports for the common status
 *   path: by our attempt id when Meta echoes our `biz_opaque_callback_data`, else by the wamid
 *   when we registered it (a status of a message we never sent is logged and dropped, so that it
 *   is not parked forever); `sent`, `delivered`, `read` → `seen`, `failed` → `undelivered`
 *   `[code] title`. The state path makes them idempotent and order-free. Inbound texts go to the
 *   common inbound path (`gateway: "whatsapp"`, the business phone number id as recipient, the
 *   quoted wamid as `replyTo`) and open the person's 24-hour window, recorded here before the
 *   answer.
 *
 * The generic route applies the reports and inbound messages before it answers 200, so an
 * answered webhook is durable and one that fails is sent again by Meta.
 */
import type { Logger } from '../../logger.js';
import type { CallbackEvent, CallbackRequest, ReceiptStatus } from '../http-carrier.js';
import type { CallbackOutcome, ProviderContext } from '../provider.js';
import type { AttemptState, InboundReport, StatusReport } from '../types.js';
import { textArray } from '../../db/arrays.js';
import { graphErrorClass } from './errors.js';
import { attemptIdOfRef } from './policy.js';
import { handshake, parseWebhook, verifySignature } from './webhook.js';
import { noteInbound, userKey, type WindowPair } from './window.js';

const STATE: Readonly<Record<ReceiptStatus, AttemptState>> = {
  sent: 'sent', delivered: 'delivered', seen: 'seen', undelivered: 'undelivered', failed: 'undelivered', expired: 'undelivered',
};

const DEFAULT_INFO: Readonly<Record<ReceiptStatus, string>> = {
  sent: 'Sent', delivered: '[0] Delivered', seen: '[0] Seen', undelivered: '[1] Undelivered', failed: '[1] Undelivered', expired: '[1] Undelivered',
};

/** What one webhook body comes to, before anything is looked up. */
export interface ReadWebhook {
  /** Statuses that name our attempt. */
  reports: StatusReport[];
  /** Statuses that name only a wamid. */
  byRef: StatusReport[];
  inbound: InboundReport[];
  /** People who wrote, and when (they open their 24-hour windows). */
  windows: Array<WindowPair & { at: number }>;
  /** Meta error codes of failed statuses that say the account or a template has a problem. */
  configCodes: number[];
}

/** The reports, inbound messages and windows of a webhook's events. Pure. */
export function readEvents(events: readonly CallbackEvent[], carrier: string): ReadWebhook {
  const out: ReadWebhook = { reports: [], byRef: [], inbound: [], windows: [], configCodes: [] };
  for (const e of events) {
    if (e.kind === 'receipt') {
      const report: StatusReport = { state: STATE[e.status], resultInfo: e.info ?? DEFAULT_INFO[e.status], at: e.at };
      const attemptId = attemptIdOfRef(e.ourRef);
      if (attemptId !== undefined) out.reports.push({ attemptId, carrier, ...report });
      else out.byRef.push({ carrier, ref: e.carrierRef, ...report });
      if (e.code !== undefined && graphErrorClass(e.code) === 'config') out.configCodes.push(e.code);
      continue;
    }
    const sender = e.from ?? e.fromUserId;
    if (sender === undefined) continue;
    const message: InboundReport = { gateway: 'whatsapp', sender, recipient: e.to, body: e.text, at: e.at, carrierRef: e.carrierRef };
    if (e.replyToCarrierRef !== undefined) message.replyTo = { carrier, ref: e.replyToCarrierRef };
    out.inbound.push(message);
    // A person known only by a business-scoped id has no number for our free-text steps to match.
    if (e.from !== undefined) out.windows.push({ phoneNumberId: e.to, user: userKey(e.from), at: e.at });
  }
  return out;
}

function answer(status: number, message?: string): CallbackOutcome {
  return message === undefined
    ? { status, body: '', contentType: 'text/plain', reports: [], inbound: [] }
    : { status, body: JSON.stringify({ message }), contentType: 'application/json', reports: [], inbound: [] };
}

const warnedConfig = new Set<string>();

function warnConfig(logger: Logger, connection: string, codes: number[]): void {
  for (const metaCode of codes) {
    const key = `${connection} ${metaCode}`;
    if (warnedConfig.has(key)) continue;
    warnedConfig.add(key);
    logger.warn({ connection, metaError: metaCode }, 'Meta reports WhatsApp messages failed for an account or payment problem (logged once per connection and error)');
  }
}

export interface WhatsappCallbackSecrets {
  app_secret: string;
  verify_token: string;
}

export async function whatsappCallback(
  connection: string, secrets: WhatsappCallbackSecrets, req: CallbackRequest, ctx: Pick<ProviderContext, 'db' | 'logger'>,
): Promise<CallbackOutcome> {
  if (req.method === 'GET') {
    const h = handshake(req.query, secrets.verify_token);
    return { status: h.status, body: h.body, contentType: 'text/plain', reports: [], inbound: [] };
  }
  if (!verifySignature(req.rawBody, req.headers['x-hub-signature-256'], secrets.app_secret)) {
    return answer(401, 'X-Hub-Signature-256 is missing or does not match the body');
  }
  let body: unknown;
  try {
    body = JSON.parse(req.rawBody.toString('utf8'));
  } catch {
    return answer(400, 'the body is not JSON');
  }
  const events = parseWebhook(body);
  if (!Array.isArray(events)) return answer(400, events.error);
  const carrier = `whatsapp.${connection}`;
  const read = readEvents(events, carrier);
  const reports = read.reports;
  if (read.byRef.length > 0) {
    // Only wamids we registered: any other (a message another system sent from the same number) is not ours.
    const { rows } = await ctx.db.query<{ ref: string }>('SELECT ref FROM carrier_refs WHERE carrier = $1 AND ref = ANY($2::text[])',
      [carrier, textArray(read.byRef.map((r) => r.ref!))]);
    const known = new Set(rows.map((r) => r.ref));
    const unknown = read.byRef.filter((r) => !known.has(r.ref!));
    for (const r of read.byRef) if (known.has(r.ref!)) reports.push(r);
    if (unknown.length > 0) {
      ctx.logger.info({ connection, statuses: unknown.length, wamids: unknown.slice(0, 5).map((r) => r.ref) }, 'WhatsApp statuses of messages we did not send; ignored');
    }
  }
  if (read.configCodes.length > 0) warnConfig(ctx.logger, connection, read.configCodes);
  await noteInbound(ctx.db, read.windows);
  return { ...answer(200), reports, inbound: read.inbound };
}
