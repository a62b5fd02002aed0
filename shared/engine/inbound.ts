/**
 * The one inbound path for every carrier (D5): normalise the addresses, store the message,
 * decide reply or unsolicited, and write the event for the owning account, all in one transaction.
 *
 * An inbound message from X to Y is a reply when the latest outbound attempt sent from Y to X on
 * that channel family is at most `reply_window_days` old (account setting, default 7).
 */
import { withTx, type Db, type Tx } from '../db/pool.js';
import type { InboundReport } from '../carriers/types.js';
import { canonicalAddress, ownerOfAddress } from '../domain/numbers.js';
import { insertEvents, payloadField, type OutboxEvent } from './events.js';
import { applyKeyword } from '../suppression/store.js';
import type { KeywordKind } from '../suppression/keywords.js';

interface ReplyMatch {
  attempt_id: number;
  created_at: Date;
  public_id: string;
  account_id: number;
  key_id: number;
  request_id: string;
  payload: string | null;
  callback: string | null;
  default_callback_url: string | null;
  reply_window_days: number;
}

export type InboundOutcome =
  | { kind: 'incomingReplyMessage'; accountId: number; inboundId: number; keyword: KeywordKind | null }
  | { kind: 'incomingMessage'; accountId: number; inboundId: number; keyword: KeywordKind | null }
  | { kind: 'unowned'; inboundId: number }
  /** The carrier delivered this message before (its `carrierRef`): stored and reported then, not again. */
  | { kind: 'repeat' };

const MATCH_COLUMNS = `a.id AS attempt_id, a.created_at, r.public_id, r.account_id, r.key_id, m.request_id, m.payload, m.callback,
              k.default_callback_url, acc.reply_window_days`;
const MATCH_FROM = `FROM attempts a
         JOIN recipients r ON r.id = a.recipient_id
         JOIN messages m ON m.id = r.message_id
         JOIN api_keys k ON k.id = r.key_id
         JOIN accounts acc ON acc.id = r.account_id`;

/**
 * The attempt a carrier names as the one answered: by our attempt id, or by its ref of it; only
 * one sent to the person who answers.
 */
async function exactReplyMatch(tx: Tx, replyTo: NonNullable<InboundReport['replyTo']>, sender: string, family: string): Promise<ReplyMatch[]> {
  const { rows } = 'attemptId' in replyTo
    ? await tx.query<ReplyMatch>(`SELECT ${MATCH_COLUMNS} ${MATCH_FROM} WHERE a.id = $1 AND a.phone = $2 AND a.family = $3`, [replyTo.attemptId, sender, family])
    : await tx.query<ReplyMatch>(
      `SELECT ${MATCH_COLUMNS} ${MATCH_FROM} JOIN carrier_refs c ON c.attempt_id = a.id
        WHERE c.ref = $1 AND c.carrier = $2 AND a.phone = $3 LIMIT 1`,
      [replyTo.ref, replyTo.carrier, sender]);
  return rows;
}

export async function ingestInbound(db: Db, msg: InboundReport, now = new Date()): Promise<InboundOutcome> {
  const sender = canonicalAddress(msg.sender);
  const recipient = canonicalAddress(msg.recipient);
  const timestamp = Math.floor((msg.at || now.getTime()) / 1000);
  return withTx(db, async (tx) => {
    // The message the carrier says this answers, else the latest one sent from Y to X on the
    // family (D5): an attempt that ended without anything leaving is passed over, the same ones
    // that are refunded (transitions.ts `isRefunded`): refused before it left ([302]/[303]/[304]/
    // [307], or by the carrier at submission), and undelivered without reaching `sent` other than
    // by its ttl (not a Viber or WhatsApp user, WhatsApp free text outside the 24-hour window). One
    // whose ttl passed while it was being sent may have reached the person. Sandbox injections
    // only ever match their own account's messages.
    // $1 X (the sender of this message), $2 the channel family, $3 Y (its recipient: our sender,
    // canonical as the attempt's row stores it: domain/numbers.ts `attemptSender`), $4 the sandbox
    // injection's account, or null. Served by the attempts_reply index (phone, family, sender, created_at DESC).
    const exact = msg.replyTo ? await exactReplyMatch(tx, msg.replyTo, sender, msg.gateway) : [];
    const { rows } = exact.length > 0 ? { rows: exact } : await tx.query<ReplyMatch>(
      `SELECT ${MATCH_COLUMNS} ${MATCH_FROM}
        WHERE a.phone = $1 AND a.family = $2 AND a.sender = $3 AND ($4::bigint IS NULL OR r.account_id = $4)
          AND (a.reached_sent OR a.state NOT IN ('rejected', 'failed', 'undelivered') OR (a.state = 'undelivered' AND a.ttl_expired))
        ORDER BY a.created_at DESC LIMIT 1`,
      [sender, msg.gateway, recipient, msg.accountId ?? null],
    );
    const match = rows[0];
    const isReply = match !== undefined && now.getTime() - match.created_at.getTime() <= match.reply_window_days * 86400_000;
    const accountId = isReply ? match.account_id : (msg.accountId ?? await ownerOfAddress(tx, recipient, msg.gateway));
    // $8: the carrier's id of the message, or null; one it delivered before inserts nothing.
    const { rows: stored } = await tx.query<{ id: number }>(
      `INSERT INTO inbound_messages (account_id, gateway, sender, recipient, body, sent_at, reply_to_attempt, carrier_ref)
       VALUES ($1, $2, $3, $4, $5, to_timestamp($6), $7, $8)
       ON CONFLICT (gateway, carrier_ref) WHERE carrier_ref IS NOT NULL DO NOTHING RETURNING id`,
      [accountId, msg.gateway, sender, recipient, msg.body, timestamp, isReply ? match.attempt_id : null, msg.carrierRef ?? null],
    );
    if (stored.length === 0) {
      return { kind: 'repeat' };
    }
    const inboundId = stored[0]!.id;
    if (accountId === null) {
      return { kind: 'unowned', inboundId };
    }
    let event: OutboxEvent;
    if (isReply) {
      event = {
        accountId, keyId: match.key_id, callbackUrl: match.callback ?? match.default_callback_url, recipientId: null,
        kind: 'incomingReplyMessage',
        body: {
          request_id: match.request_id,
          message_id: match.public_id,
          payload: payloadField(match.payload), // left out when the message had none (D4)
          gateway: msg.gateway,
          timestamp,
          type: 'incoming',
          sender,
          recipient,
          body: msg.body,
        },
      };
    } else {
      const { rows: keys } = await tx.query<{ id: number; default_callback_url: string | null }>(
        'SELECT id, default_callback_url FROM api_keys WHERE account_id = $1 AND is_primary',
        [accountId],
      );
      event = {
        accountId, keyId: keys[0]?.id ?? null, callbackUrl: keys[0]?.default_callback_url ?? null, recipientId: null,
        kind: 'incomingMessage',
        body: { gateway: msg.gateway, timestamp, type: 'incoming', sender, recipient, body: msg.body },
      };
    }
    await insertEvents(tx, [event]);
    // An opt-out (or opt-in) keyword changes the owner's suppression list; the message is still
    // delivered as the event above.
    const keyword = await applyKeyword(tx, accountId, msg.gateway, sender, msg.body);
    return { kind: event.kind as 'incomingReplyMessage' | 'incomingMessage', accountId, inboundId, keyword };
  });
}
