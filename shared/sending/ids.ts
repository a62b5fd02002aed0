/**
 * Message and recipient ids (D2). A message id is 20 lowercase hex characters (80 random bits).
 * A batch call's recipients are `<message_id>-<index>`. A `single` call (`/v2/message`, the simple
 * endpoints, verification) gives every recipient an id of its own: the message id's first 18
 * characters and the recipient's index as 2 hex digits. Recipients have no index by their id (the
 * hot path never reads them so, docs/architecture.md); this form leads from any recipient id to its
 * message through the messages' primary key (an exact id, or an 18-character prefix range), and
 * from the message to its recipients through (account, created_at) (shared/lookup).
 */
import { randomBytes } from 'node:crypto';

const ID_BYTES = 10;
export const MESSAGE_ID_LENGTH = ID_BYTES * 2;
/** The part of a message id that a `single` call's recipient ids share with it. */
export const SINGLE_PREFIX_LENGTH = MESSAGE_ID_LENGTH - 2;

// Ids come from a pool of random bytes refilled 4 KiB at a time: a randomBytes call per id cost
// more than the bytes (the same pooling Node does for randomUUID).
let idPool = Buffer.alloc(0);
let idOffset = 0;
export function newId(): string {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(4096);
    idOffset = 0;
  }
  idOffset += ID_BYTES;
  return idPool.toString('hex', idOffset - ID_BYTES, idOffset);
}

/** The id of recipient `index` of a `single` call's message. */
export function singleRecipientId(messageId: string, index: number): string {
  if (!Number.isInteger(index) || index < 0 || index > 255) {
    throw new Error(`a single call's recipient index must be 0..255 (got ${index})`);
  }
  return messageId.slice(0, SINGLE_PREFIX_LENGTH) + index.toString(16).padStart(2, '0');
}

/** What an id given to a lookup names. */
export type IdRef =
  /** `<message_id>-<index>`: one recipient of a batch call's message. */
  | { kind: 'indexed'; messageId: string; index: number }
  /** 20 hex characters: a message, or a `single` call's recipient (its message shares the prefix). */
  | { kind: 'plain'; id: string; prefix: string };

const ID_RE = /^([0-9a-f]{20})(?:-(0|[1-9]\d{0,3}))?$/;

/** Read an id given by a client, or null when it cannot be one of ours. */
export function parseIdRef(value: string): IdRef | null {
  const m = ID_RE.exec(value);
  if (!m) {
    return null;
  }
  return m[2] === undefined ? { kind: 'plain', id: m[1]!, prefix: m[1]!.slice(0, SINGLE_PREFIX_LENGTH) } : { kind: 'indexed', messageId: m[1]!, index: Number(m[2]) };
}
