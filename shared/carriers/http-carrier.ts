/**
 * What the HTTP carriers (WhatsApp Cloud API, Viber Business Messages) have in common, in
 * carrier-neutral terms: the outcome of one send request and the events one callback request
 * carries. Each connector's wire module translates its protocol into these; the connector turns
 * them into the engine's StatusReport / InboundReport (shared/carriers/types.ts).
 */

/** What one send request to the carrier came to. `info` is the event's `result_info`, `[<code>] <title>`. */
export type SendOutcome =
  /** Taken by the carrier; `carrierRef` is its message id (wamid, message_token). */
  | { kind: 'accepted'; carrierRef: string }
  /** The channel cannot reach this recipient now (not a user, no device, outside the window): the step ends `undelivered` and the flow falls back at once. */
  | { kind: 'unreachable'; code: number; info: string }
  /** Throttled or a transient carrier fault: the same step is tried again (after `afterMs` when the carrier said so), inside its ttl. */
  | { kind: 'retry'; code: number; info: string; afterMs?: number }
  /** Refused for good: `config` a configuration, account or payment problem (warned once per sender); otherwise our request was bad. The step ends `failed` and the flow falls back. */
  | { kind: 'failed'; code: number; info: string; config: boolean };

/** How a connector's table classes a refused send (an error code, an HTTP status). */
export type RefusalClass = 'unreachable' | 'retry' | 'config' | 'request';

/** The SendOutcome of a refused send of this class; `afterMs` is kept for retries only. */
export function refusedOutcome(cls: RefusalClass, code: number, info: string, afterMs?: number): SendOutcome {
  switch (cls) {
    case 'unreachable':
      return { kind: 'unreachable', code, info };
    case 'retry':
      return afterMs === undefined ? { kind: 'retry', code, info } : { kind: 'retry', code, info, afterMs };
    case 'config':
      return { kind: 'failed', code, info, config: true };
    case 'request':
      return { kind: 'failed', code, info, config: false };
  }
}

/** A status the carrier reports for a message it took. */
export type ReceiptStatus = 'sent' | 'delivered' | 'seen' | 'undelivered' | 'failed' | 'expired';

export type CallbackEvent =
  | {
    kind: 'receipt';
    /** The carrier's message id, as returned by the send (wamid, message_token). */
    carrierRef: string;
    /** Our reference sent along with the message (biz_opaque_callback_data, tracking data), when the carrier echoes it. */
    ourRef?: string;
    status: ReceiptStatus;
    /** The carrier's numeric error code of a failure, when given. */
    code?: number;
    /** `result_info` for the event, e.g. `[131026] Message Undeliverable`. */
    info?: string;
    /** Unix milliseconds (carrier time when given, else receipt time). */
    at: number;
  }
  | {
    kind: 'inbound';
    /** The person's phone number (digits), when the carrier gives it. */
    from?: string;
    /** A carrier-scoped user id (WhatsApp BSUID) when the number is withheld. */
    fromUserId?: string;
    /** What received it: the WhatsApp phone number id, the Viber service id or sender name. */
    to: string;
    text: string;
    at: number;
    /** The carrier's id of the inbound message. */
    carrierRef: string;
    /** The carrier id of the outbound message this answers (WhatsApp `context.id`). */
    replyToCarrierRef?: string;
    /** Our reference of the outbound message this answers (Viber tracking data). */
    replyToOurRef?: string;
  };

/** The bytes and parts of one callback request, as the generic callback route hands them over (signature checks need the raw bytes). */
export interface CallbackRequest {
  method: 'GET' | 'POST';
  /** The path below `/callbacks/<kind>/<connection>` (e.g. `/<token>`), '' when none. */
  subpath: string;
  query: URLSearchParams;
  /** Header names in lower case. */
  headers: Record<string, string | undefined>;
  rawBody: Buffer;
  /** The peer's address (for source allowlists). */
  remoteAddress: string;
}

/** What the route answers the carrier, and what it reported. */
export interface CallbackAnswer {
  status: number;
  body?: string;
  contentType?: string;
  events: CallbackEvent[];
}
