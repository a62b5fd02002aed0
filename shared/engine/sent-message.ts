/**
 * The `sentMessage` event (spec "sentMessage fields", D4), as one table of its fields in the order
 * they are written. The writer the send path uses is derived from it: dispatch and the status
 * batches hand over a message's facts, and `writeSentMessage` writes the event's JSON straight into
 * the statement's bytes (event-json.ts), with no object or string made for it.
 */
import { eventKeyOf, type AttemptState, type Channel } from '../channels/index.js';
import { round4 } from '../domain/money.js';
import { JsonBytes } from './event-json.js';
import { assertUnreachable } from '../errors.js';

export interface SentMessageFacts {
  requestId: string;
  publicId: string;
  channel: Channel;
  /** The stored payload text (json column), or null: the event then has no `payload` (D4). */
  payload: string | null;
  phone: string;
  state: AttemptState;
  resultInfo: string;
  /** Unix milliseconds of the status change. */
  at: number;
  sender: string;
  country: number;
  operator: number;
  priceCzk: number;
  priceEur: number;
  count: number;
  /** The SMS gateway (`sms` object's `gateway`); null for the other channels, whose objects have none. */
  smsGateway: string | null;
}

type Of<T> = (f: SentMessageFacts) => T;

/** One field: a fixed key (or one that depends on the facts) and how its value is written. */
type Field = { key: string | Of<string> } & (
  | { string: Of<string> }
  | { number: Of<number> }
  /** JSON text written as it is (a stored payload); left out when the value is null (D4). */
  | { optionalJson: Of<string | null> }
  /** Left out when the value is null. */
  | { optionalString: Of<string | null> }
  | { object: readonly Field[] }
);

/** The event's fields, in order. */
export const SENT_MESSAGE_FIELDS: readonly Field[] = [
  { key: 'request_id', string: (f) => f.requestId },
  { key: 'message_id', string: (f) => f.publicId },
  { key: 'gateway', string: (f) => f.channel },
  { key: 'timestamp', number: (f) => Math.floor(f.at / 1000) },
  // D4: omitted when the message had none, never null (the origin's schemas type it as an object).
  { key: 'payload', optionalJson: (f) => f.payload },
  { key: 'type', string: () => 'outgoing' },
  { key: 'to', object: [{ key: 'phone_number', string: (f) => f.phone }] },
  { key: 'result', string: (f) => f.state },
  { key: 'result_info', string: (f) => f.resultInfo },
  // The channel object, named by the channel (`whatsapp_body` for whatsapp_text).
  {
    key: (f) => eventKeyOf(f.channel),
    object: [
      { key: 'sender', string: (f) => f.sender },
      { key: 'country', number: (f) => f.country },
      { key: 'operator', number: (f) => f.operator },
      { key: 'price_czk', number: (f) => round4(f.priceCzk) },
      { key: 'price_eur', number: (f) => round4(f.priceEur) },
      { key: 'count', number: (f) => f.count },
      { key: 'gateway', optionalString: (f) => f.smsGateway },
    ],
  },
];

/** The table flattened into writing steps, with the fixed text between values prepared as bytes. */
type Op =
  | { kind: 'text'; bytes: Uint8Array }
  | { kind: 'key'; comma: boolean; key: Of<string> }
  | { kind: 'string'; value: Of<string> }
  | { kind: 'number'; value: Of<number> }
  | { kind: 'optional'; prefix: Uint8Array; value: Of<string | null>; json: boolean };

const bytesOf = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'utf8'));

function compile(fields: readonly Field[]): Op[] {
  const ops: Op[] = [];
  let text = '{';
  const flush = () => {
    if (text) ops.push({ kind: 'text', bytes: bytesOf(text) });
    text = '';
  };
  fields.forEach((field, i) => {
    const comma = i > 0 ? ',' : '';
    if ('optionalString' in field || 'optionalJson' in field) {
      if (i === 0 || typeof field.key !== 'string') throw new Error('an optional field must have a fixed key and follow another field');
      flush();
      const prefix = bytesOf(`,${JSON.stringify(field.key)}:`);
      ops.push('optionalJson' in field
        ? { kind: 'optional', prefix, value: field.optionalJson, json: true }
        : { kind: 'optional', prefix, value: field.optionalString, json: false });
      return;
    }
    if (typeof field.key === 'string') {
      text += `${comma}${JSON.stringify(field.key)}:`;
    } else {
      flush();
      ops.push({ kind: 'key', comma: i > 0, key: field.key });
    }
    if ('object' in field) {
      const inner = compile(field.object);
      const first = inner[0];
      if (first?.kind === 'text') {
        text += Buffer.from(first.bytes).toString('utf8');
        inner.shift();
      }
      flush();
      ops.push(...inner);
      return;
    }
    flush();
    if ('string' in field) ops.push({ kind: 'string', value: field.string });
    else ops.push({ kind: 'number', value: field.number });
  });
  text += '}';
  flush();
  // Adjacent fixed texts (an object's end and the next key) become one.
  const merged: Op[] = [];
  for (const op of ops) {
    const last = merged[merged.length - 1];
    if (op.kind === 'text' && last?.kind === 'text') {
      merged[merged.length - 1] = { kind: 'text', bytes: new Uint8Array([...last.bytes, ...op.bytes]) };
    } else {
      merged.push(op);
    }
  }
  return merged;
}

const OPS = compile(SENT_MESSAGE_FIELDS);
const COLON = 0x3a;
const COMMA = 0x2c;

/** Writes the event's JSON (what `JSON.stringify` would write for it, byte for byte). */
export function writeSentMessage(w: JsonBytes, f: SentMessageFacts): void {
  for (let i = 0; i < OPS.length; i++) {
    const op = OPS[i]!;
    switch (op.kind) {
      case 'text':
        w.bytes(op.bytes);
        break;
      case 'key':
        if (op.comma) w.byte(COMMA);
        w.string(op.key(f));
        w.byte(COLON);
        break;
      case 'string':
        w.string(op.value(f));
        break;
      case 'number':
        w.number(op.value(f));
        break;
      case 'optional': {
        const value = op.value(f);
        if (value !== null) {
          w.bytes(op.prefix);
          if (op.json) w.utf8(value);
          else w.string(value);
        }
        break;
      }
      default:
        assertUnreachable(op);
    }
  }
}

const textWriter = new JsonBytes(4096);

/** The event's JSON as a string (the same writer; for callers that need a string). */
export function sentMessageText(f: SentMessageFacts): string {
  textWriter.reset();
  writeSentMessage(textWriter, f);
  return textWriter.toString();
}
