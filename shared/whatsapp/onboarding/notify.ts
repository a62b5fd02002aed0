/**
 * Partner notifications (D7): each step of a signup POSTs an event to its `partner_callback_url`.
 *
 * They travel through the webhook machinery instead of a loop of their own: the event is written to
 * `events` and a `webhook_batches` row of its own (in the transaction that records the step on the
 * signup), and its delivery job goes to the webhook queue. The webhook pool then does what it does
 * for every webhook (D4): the body is a JSON array (of one event), signed with Standard Webhooks
 * headers when the signup's API key has a `webhook_secret`, retried on D4's schedule, dead-lettered
 * and replayable through the admin API, re-enqueued by the recovery sweep when Redis lost the job,
 * and refused at connect time when the host resolves to a private address (SSRF guard). The outbox
 * relay is not involved: it would hold the event up to WEBHOOK_LINGER_MS and could mix it into
 * a batch of the key's message events when the partner uses one URL for both.
 */
import { randomUUID } from 'node:crypto';
import { withTx, type Db, type Tx } from '../../db/pool.js';
import type { Logger } from '../../logger.js';
import type { Queues } from '../../queues.js';
import { enqueueBatches } from '../../webhooks/jobs.js';
import { changeSignup, type LogEntry, type Signup, type SignupChange, type StatusGuard } from './store.js';

export type PartnerEventName = 'signup_started' | 'es_finished' | 'es_cancelled' | 'waba_subscribed' | 'number_registered' | 'completed' | 'failed';

/** The `kind` of these rows in `events`. */
export const ONBOARDING_EVENT_KIND = 'whatsappOnboarding';

/** An event as the partner receives it (inside the JSON array of the POST). */
export interface PartnerEvent {
  event: PartnerEventName;
  partner_client_id: string;
  /** The client's WABA id, once Embedded Signup reported it. */
  whatsapp_id?: string;
  /** Unix time (seconds), as in every event of the service. */
  timestamp: number;
  /** 1, 2, …: the order of the signup's events (deliveries may overtake one another). */
  sequence: number;
  /** es_cancelled: Embedded Signup's step the client left at. failed: our step that failed. */
  current_step?: string;
  /** number_registered (and completed): the phone number id. */
  phone_number_id?: string;
  /** failed: what went wrong, in words (`[190] Invalid OAuth access token`). */
  error?: string;
}

export interface PartnerEventFacts {
  event: PartnerEventName;
  whatsappId?: string | null;
  currentStep?: string | null;
  phoneNumberId?: string | null;
  error?: string | null;
}

/** The event body (pure; key order fixed so partners see one shape). */
export function partnerEvent(signup: Pick<Signup, 'partnerClientId'>, facts: PartnerEventFacts, sequence: number, now = Date.now()): PartnerEvent {
  const out: PartnerEvent = { event: facts.event, partner_client_id: signup.partnerClientId, timestamp: Math.floor(now / 1000), sequence };
  if (facts.whatsappId) out.whatsapp_id = facts.whatsappId;
  if (facts.currentStep) out.current_step = facts.currentStep;
  if (facts.phoneNumberId) out.phone_number_id = facts.phoneNumberId;
  if (facts.error) out.error = facts.error;
  return out;
}

export interface NotifyDeps {
  db: Db;
  queues: Queues;
  logger: Logger;
  /** The webhook retry schedule's length (D4). */
  webhookRetries: number;
}

/**
 * Records a step on the signup (change + log entries) and, with `event`, writes the partner's
 * notification, in one transaction; then queues its delivery. With `from`, the change applies only
 * while the signup's status passes that guard, and nothing is written otherwise (returns false).
 */
export async function recordStep(
  deps: NotifyDeps, signup: Signup, change: SignupChange, entries: LogEntry[], event: PartnerEventFacts | null, from?: StatusGuard,
): Promise<boolean> {
  const batch = await withTx(deps.db, async (tx) => {
    const logged = event ? [...entries, { at: new Date().toISOString(), event: 'partner_notified', partner_event: event.event }] : entries;
    if (!(await changeSignup(tx, signup.id, change, logged, from))) return false;
    return event ? writeEvent(tx, signup, event) : null;
  });
  if (batch === false) return false;
  if (batch) {
    try {
      await enqueueBatches(deps.queues, [batch], deps.webhookRetries);
    } catch (err) {
      // The batch row is pending in Postgres: the recovery sweep queues it again.
      deps.logger.warn({ err: (err as Error).message, batchId: batch.id }, 'onboarding notification not queued; the recovery sweep will');
    }
  }
  return true;
}

async function writeEvent(tx: Tx, signup: Signup, facts: PartnerEventFacts): Promise<{ id: number; url: string }> {
  const { rows: seq } = await tx.query<{ events_sent: number }>(
    'UPDATE whatsapp_signups SET events_sent = events_sent + 1 WHERE id = $1 RETURNING events_sent', [signup.id]);
  const body = JSON.stringify(partnerEvent(signup, facts, seq[0]!.events_sent));
  const { rows: ev } = await tx.query<{ id: number }>(
    `INSERT INTO events (account_id, key_id, callback_url, kind, body) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [signup.accountId, signup.keyId, signup.partnerCallbackUrl, ONBOARDING_EVENT_KIND, body],
  );
  const { rows: b } = await tx.query<{ id: number }>(
    `INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [`msg_${randomUUID().replace(/-/g, '')}`, signup.accountId, signup.keyId, signup.partnerCallbackUrl, [ev[0]!.id]],
  );
  return { id: Number(b[0]!.id), url: signup.partnerCallbackUrl };
}
