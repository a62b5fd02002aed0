/**
 * Pure SMPP 3.4 helpers: building submit_sm field sets for one SMS, encoding and decoding the PDUs
 * the session exchanges, splitting the byte stream into PDUs, parsing delivery receipts,
 * canonicalising message ids and reassembling concatenated mobile-originated messages. No sockets,
 * no timers, no library state.
 */
import type { AttemptState } from '../../channels/index.js';
import type { SmsEncoding } from '../../sms/gsm7.js';
import { decodeGsm7Unpacked, decodeUcs2, encodeGsm7Unpacked, encodeUcs2 } from '../../sms/gsm7.js';
import { normalizePhone } from '../../phone/normalize.js';

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

export const DATA_CODING_GSM7 = 0x00;
export const DATA_CODING_UCS2 = 0x08;

/** esm_class bit 6: the short message starts with a User Data Header. */
export const ESM_CLASS_UDHI = 0x40;
/** esm_class bits 2-5 (mask) hold the message type on deliver_sm. */
export const ESM_CLASS_TYPE_MASK = 0x3c;
/** Message type 0001 (esm_class xx0001xx): SMSC delivery receipt. */
export const ESM_CLASS_SMSC_RECEIPT = 0x04;
/** Message type 1000 (esm_class xx1000xx): intermediate delivery notification. */
export const ESM_CLASS_INTERMEDIATE_NOTIFICATION = 0x20;

export const TON_INTERNATIONAL = 1;
/** A national number (SMPP 3.4 5.2.5): without its country's calling code. */
export const TON_NATIONAL = 2;
export const TON_ALPHANUMERIC = 5;
export const NPI_UNKNOWN = 0;
export const NPI_ISDN = 1;

/** TLV tags we read from raw PDUs. */
export const TLV = {
  receipted_message_id: 0x001e,
  sar_msg_ref_num: 0x020c,
  sar_total_segments: 0x020e,
  sar_segment_seqnum: 0x020f,
  message_payload: 0x0424,
  message_state: 0x0427,
} as const;

/**
 * SMPP 3.4 command ids, plus the 5.0 broadcast commands the `smpp` library knows (a request it
 * knows gets its own `*_resp` when refused, anything else generic_nack; see `responseCommandId`).
 */
export const COMMAND_ID = {
  generic_nack: 0x80000000,
  bind_receiver: 0x00000001,
  bind_receiver_resp: 0x80000001,
  bind_transmitter: 0x00000002,
  bind_transmitter_resp: 0x80000002,
  query_sm: 0x00000003,
  query_sm_resp: 0x80000003,
  submit_sm: 0x00000004,
  submit_sm_resp: 0x80000004,
  deliver_sm: 0x00000005,
  deliver_sm_resp: 0x80000005,
  unbind: 0x00000006,
  unbind_resp: 0x80000006,
  replace_sm: 0x00000007,
  replace_sm_resp: 0x80000007,
  cancel_sm: 0x00000008,
  cancel_sm_resp: 0x80000008,
  bind_transceiver: 0x00000009,
  bind_transceiver_resp: 0x80000009,
  outbind: 0x0000000b,
  enquire_link: 0x00000015,
  enquire_link_resp: 0x80000015,
  submit_multi: 0x00000021,
  submit_multi_resp: 0x80000021,
  alert_notification: 0x00000102,
  data_sm: 0x00000103,
  data_sm_resp: 0x80000103,
  broadcast_sm: 0x00000111,
  broadcast_sm_resp: 0x80000111,
  query_broadcast_sm: 0x00000112,
  query_broadcast_sm_resp: 0x80000112,
  cancel_broadcast_sm: 0x00000113,
  cancel_broadcast_sm_resp: 0x80000113,
} as const;

type CommandName = keyof typeof COMMAND_ID;

/** Single-part / per-part capacity: GSM-7 counted in septets (escape = 2), UCS-2 in octets. */
const LIMITS = {
  gsm7: { single: 160, part: 153 },
  ucs2: { single: 140, part: 134 },
} as const;

// ---------------------------------------------------------------------------------------------
// Building submit_sm
// ---------------------------------------------------------------------------------------------

/** short_message: raw bytes, or UDH + body (`encodeSubmitSm` then ORs esm_class with 0x40, as the library does). */
export type ShortMessage = Buffer | { udh: Buffer; message: Buffer };

/** The submit_sm fields switchboard sets; everything else stays at the SMPP default (0 / empty). */
export interface SubmitSmFields {
  service_type: string;
  source_addr_ton: number;
  source_addr_npi: number;
  source_addr: string;
  dest_addr_ton: number;
  dest_addr_npi: number;
  destination_addr: string;
  esm_class: number;
  registered_delivery: number;
  data_coding: number;
  /** SMPP time string; '' = SMSC default validity. */
  validity_period: string;
  short_message: ShortMessage;
}

export interface SubmitSmsInput {
  /** Destination, E.164 digits (a leading `+` is tolerated and removed). */
  destination: string;
  /** Numeric (`+`? digits) or alphanumeric sender. */
  sender: string;
  encoding: SmsEncoding;
  /** Text of each part, as planned by `planSms` (one element for a single-part SMS). */
  parts: string[];
  /** Validity in minutes; undefined, 0 or negative = leave to the SMSC. */
  validityMinutes?: number;
  /** Concatenation reference 0..255 shared by all parts (required when parts.length > 1). */
  reference?: number;
  /** service_type; default ''. */
  serviceType?: string;
  /** registered_delivery; default 1 (final receipt, success or failure). */
  registeredDelivery?: number;
}

/** UDH for 8-bit-reference concatenation: `05 00 03 ref total seq` (seq is 1-based). */
export function concatUdh(reference: number, total: number, seq: number): Buffer {
  return Buffer.from([0x05, 0x00, 0x03, reference & 0xff, total & 0xff, seq & 0xff]);
}

/** Source address TON/NPI: numeric → international/ISDN (1/1), anything else → alphanumeric (5/0). */
export function senderAddress(sender: string): { source_addr: string; source_addr_ton: number; source_addr_npi: number } {
  const trimmed = sender.trim();
  if (trimmed === '') throw new RangeError('sender is empty');
  if (/^\+?\d+$/.test(trimmed)) {
    const digits = trimmed.replace(/^\+/, '');
    if (digits.length > 20) throw new RangeError(`sender "${trimmed}" is longer than 20 digits`);
    return { source_addr: digits, source_addr_ton: TON_INTERNATIONAL, source_addr_npi: NPI_ISDN };
  }
  if (!/^[\x20-\x7e]+$/.test(trimmed)) {
    throw new RangeError(`sender "${trimmed}" contains characters outside printable ASCII`);
  }
  if (trimmed.length > 20) throw new RangeError(`sender "${trimmed}" is longer than 20 characters`);
  return { source_addr: trimmed, source_addr_ton: TON_ALPHANUMERIC, source_addr_npi: NPI_UNKNOWN };
}

/**
 * SMPP relative time `YYMMDDhhmmss000R` for a number of minutes. Expressed in days/hours/minutes/
 * seconds only (no months or years, which are calendar-dependent); capped at 99 days 23:59:59.
 */
export function relativeValidity(minutes: number): string {
  if (!Number.isFinite(minutes) || minutes <= 0) throw new RangeError(`validity minutes must be > 0, got ${minutes}`);
  const maxSeconds = ((99 * 24 + 23) * 60 + 59) * 60 + 59;
  let seconds = Math.min(Math.ceil(minutes * 60), maxSeconds);
  const days = Math.floor(seconds / 86400);
  seconds -= days * 86400;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const mins = Math.floor(seconds / 60);
  seconds -= mins * 60;
  const two = (n: number): string => String(n).padStart(2, '0');
  return `0000${two(days)}${two(hours)}${two(mins)}${two(seconds)}000R`;
}

/** relativeValidity of the few validities attempts carry, kept (one string per attempt otherwise). */
const validities = new Map<number, string>();

function validityOf(minutes: number): string {
  let value = validities.get(minutes);
  if (value === undefined) {
    value = relativeValidity(minutes);
    if (validities.size >= 256) validities.clear();
    validities.set(minutes, value);
  }
  return value;
}

/**
 * Turns one SMS into the submit_sm field sets to send, in part order. Multi-part messages carry an
 * 8-bit-reference concatenation UDH and esm_class 0x40; GSM-7 is sent unpacked (one septet per
 * octet, data_coding 0), UCS-2 as UTF-16BE (data_coding 8). Throws RangeError on invalid input
 * (bad destination/sender, empty parts, a part over the per-part limit, missing/invalid reference).
 */
export function buildSubmitSms(input: SubmitSmsInput): SubmitSmFields[] {
  const destination = input.destination.trim().replace(/^\+/, '');
  if (!/^\d{1,20}$/.test(destination)) throw new RangeError(`destination "${input.destination}" is not 1-20 digits`);
  const { parts } = input;
  if (parts.length === 0) throw new RangeError('parts is empty');
  if (parts.length > 255) throw new RangeError(`${parts.length} parts; at most 255 can be concatenated`);
  const multi = parts.length > 1;
  const reference = input.reference ?? (multi ? undefined : 0);
  if (reference === undefined || !Number.isInteger(reference) || reference < 0 || reference > 255) {
    throw new RangeError(`concatenation reference must be an integer 0..255, got ${String(input.reference)}`);
  }
  const source = senderAddress(input.sender);
  const validity =
    input.validityMinutes !== undefined && input.validityMinutes > 0 ? validityOf(input.validityMinutes) : '';
  const limit = multi ? LIMITS[input.encoding].part : LIMITS[input.encoding].single;
  const unit = input.encoding === 'gsm7' ? 'septets' : 'octets';
  const dataCoding = input.encoding === 'gsm7' ? DATA_CODING_GSM7 : DATA_CODING_UCS2;

  return parts.map((text, index) => {
    const body = input.encoding === 'gsm7' ? encodeGsm7Unpacked(text) : encodeUcs2(text);
    if (body.length > limit) {
      throw new RangeError(`part ${index + 1} of ${parts.length} is ${body.length} ${unit}; the limit is ${limit}`);
    }
    // The source fields named rather than spread: one literal shape per part (docs/architecture.md, "Hot loops").
    return {
      service_type: input.serviceType ?? '',
      source_addr: source.source_addr,
      source_addr_ton: source.source_addr_ton,
      source_addr_npi: source.source_addr_npi,
      dest_addr_ton: TON_INTERNATIONAL,
      dest_addr_npi: NPI_ISDN,
      destination_addr: destination,
      esm_class: multi ? ESM_CLASS_UDHI : 0,
      registered_delivery: input.registeredDelivery ?? 1,
      data_coding: dataCoding,
      validity_period: validity,
      short_message: multi ? { udh: concatUdh(reference, parts.length, index + 1), message: body } : body,
    };
  });
}

/**
 * The optional parameters a submit_sm may carry (SMPP 3.4 §4.4.1), named as the `smpp` library
 * names them. Left out: callback_num, callback_num_pres_ind and callback_num_atag (the library
 * takes them as lists of values) and alert_on_msg_delivery (the library writes a value octet the
 * spec does not have).
 */
export interface SubmitSmTlvs {
  user_message_reference?: number;
  source_port?: number;
  source_addr_subunit?: number;
  dest_port?: number;
  dest_addr_subunit?: number;
  sar_msg_ref_num?: number;
  sar_total_segments?: number;
  sar_segment_seqnum?: number;
  more_messages_to_send?: number;
  payload_type?: number;
  message_payload?: Buffer;
  privacy_indicator?: number;
  source_subaddress?: Buffer;
  dest_subaddress?: Buffer;
  user_response_code?: number;
  language_indicator?: number;
  display_time?: number;
  sms_signal?: number;
  ms_validity?: Buffer;
  ms_msg_wait_facilities?: number;
  number_of_messages?: number;
  its_reply_type?: number;
  its_session_info?: Buffer;
  ussd_service_op?: number;
}

type TlvType = 'int8' | 'int16' | 'octets';

const SUBMIT_SM_TLVS: Readonly<Record<keyof SubmitSmTlvs, { tag: number; type: TlvType }>> = {
  user_message_reference: { tag: 0x0204, type: 'int16' },
  source_port: { tag: 0x020a, type: 'int16' },
  source_addr_subunit: { tag: 0x000d, type: 'int8' },
  dest_port: { tag: 0x020b, type: 'int16' },
  dest_addr_subunit: { tag: 0x0005, type: 'int8' },
  sar_msg_ref_num: { tag: TLV.sar_msg_ref_num, type: 'int16' },
  sar_total_segments: { tag: TLV.sar_total_segments, type: 'int8' },
  sar_segment_seqnum: { tag: TLV.sar_segment_seqnum, type: 'int8' },
  more_messages_to_send: { tag: 0x0426, type: 'int8' },
  payload_type: { tag: 0x0019, type: 'int8' },
  message_payload: { tag: TLV.message_payload, type: 'octets' },
  privacy_indicator: { tag: 0x0201, type: 'int8' },
  source_subaddress: { tag: 0x0202, type: 'octets' },
  dest_subaddress: { tag: 0x0203, type: 'octets' },
  user_response_code: { tag: 0x0205, type: 'int8' },
  language_indicator: { tag: 0x020d, type: 'int8' },
  display_time: { tag: 0x1201, type: 'int8' },
  sms_signal: { tag: 0x1203, type: 'int16' },
  ms_validity: { tag: 0x1204, type: 'octets' },
  ms_msg_wait_facilities: { tag: 0x0030, type: 'int8' },
  number_of_messages: { tag: 0x0304, type: 'int8' },
  its_reply_type: { tag: 0x1380, type: 'int8' },
  its_session_info: { tag: 0x1383, type: 'octets' },
  ussd_service_op: { tag: 0x0501, type: 'int8' },
};

interface TlvToWrite {
  tag: number;
  type: TlvType;
  value: number | Buffer;
}

/** The TLVs to write, in the caller's key order (the order the library writes them in). */
function submitSmTlvs(tlvs: SubmitSmTlvs): TlvToWrite[] {
  const out: TlvToWrite[] = [];
  for (const [name, value] of Object.entries(tlvs) as [string, number | Buffer | undefined][]) {
    if (value === undefined) continue;
    const spec = SUBMIT_SM_TLVS[name as keyof SubmitSmTlvs] as { tag: number; type: TlvType } | undefined;
    if (!spec) throw new RangeError(`${name} is not a submit_sm TLV this encoder knows`);
    if ((spec.type === 'octets') !== Buffer.isBuffer(value)) {
      throw new TypeError(`TLV ${name} must be ${spec.type === 'octets' ? 'a Buffer' : 'a number'}`);
    }
    out.push({ tag: spec.tag, type: spec.type, value });
  }
  return out;
}

function tlvValueLength(t: TlvToWrite): number {
  return Buffer.isBuffer(t.value) ? t.value.length : t.type === 'int16' ? 2 : 1;
}

/**
 * A submit_sm PDU with these fields, optional parameters and sequence number, written straight
 * into one buffer: the bytes the `smpp` library writes for the same fields (C-strings as ASCII,
 * the UDH indicator set in esm_class when there is a UDH, every other field 0 or empty), without
 * its generic per-field filters, which were a tenth of the SMS worker's time at full load.
 */
export function encodeSubmitSm(f: SubmitSmFields, sequence: number, tlvs?: SubmitSmTlvs): Buffer {
  const serviceType = Buffer.from(f.service_type, 'ascii');
  const source = Buffer.from(f.source_addr, 'ascii');
  const destination = Buffer.from(f.destination_addr, 'ascii');
  const validity = Buffer.from(f.validity_period, 'ascii');
  const sm = shortMessageBytes(f.short_message);
  const udh = !Buffer.isBuffer(f.short_message) && f.short_message.udh.length > 0;
  const optional = tlvs ? submitSmTlvs(tlvs) : [];
  let length = 16 + serviceType.length + 1 + 2 + source.length + 1 + 2 + destination.length + 1 + 3 + 1 + validity.length + 1 + 4 + 1 + sm.length;
  for (const t of optional) length += 4 + tlvValueLength(t);
  const b = Buffer.allocUnsafe(length);
  let o = writeHeader(b, COMMAND_ID.submit_sm, 0, sequence);
  o = writeCString(b, o, serviceType);
  b[o++] = f.source_addr_ton;
  b[o++] = f.source_addr_npi;
  o = writeCString(b, o, source);
  b[o++] = f.dest_addr_ton;
  b[o++] = f.dest_addr_npi;
  o = writeCString(b, o, destination);
  b[o++] = udh ? f.esm_class | ESM_CLASS_UDHI : f.esm_class;
  b[o++] = 0; // protocol_id
  b[o++] = 0; // priority_flag
  b[o++] = 0; // schedule_delivery_time: '' (immediately)
  o = writeCString(b, o, validity);
  b[o++] = f.registered_delivery;
  b[o++] = 0; // replace_if_present_flag
  b[o++] = f.data_coding;
  b[o++] = 0; // sm_default_msg_id
  b[o++] = sm.length;
  o += sm.copy(b, o);
  for (const t of optional) {
    o = b.writeUInt16BE(t.tag, o);
    o = b.writeUInt16BE(tlvValueLength(t), o);
    if (Buffer.isBuffer(t.value)) o += t.value.copy(b, o);
    else o = t.type === 'int16' ? b.writeUInt16BE(t.value, o) : b.writeUInt8(t.value, o);
  }
  return b;
}

/** The bytes a ShortMessage puts on the wire (UDH first). */
export function shortMessageBytes(sm: ShortMessage): Buffer {
  return Buffer.isBuffer(sm) ? sm : Buffer.concat([sm.udh, sm.message]);
}

// ---------------------------------------------------------------------------------------------
// Framing, headers and the session's other PDUs
// ---------------------------------------------------------------------------------------------

export const PDU_HEADER_LENGTH = 16;

/**
 * The longest PDU accepted from a peer. The `smpp` library refused anything over 16 KiB; SMSCs send
 * a few hundred octets, so this only keeps a corrupt command_length from making us buffer forever.
 */
export const MAX_PDU_LENGTH = 65_536;

const RESPONSE_BIT = 0x80000000;

const COMMAND_NAMES: ReadonlyMap<number, CommandName> = new Map(
  (Object.entries(COMMAND_ID) as [CommandName, number][]).map(([name, id]) => [id, name]),
);

const BIND_RESP_IDS: ReadonlySet<number> = new Set([
  COMMAND_ID.bind_receiver_resp,
  COMMAND_ID.bind_transmitter_resp,
  COMMAND_ID.bind_transceiver_resp,
]);

/** For logs: the command's name, or its id in hex when it is not an SMPP command. */
export function commandName(commandId: number): string {
  return COMMAND_NAMES.get(commandId) ?? `0x${commandId.toString(16).padStart(8, '0')}`;
}

export function isResponse(commandId: number): boolean {
  return commandId >= RESPONSE_BIT;
}

/** The command id that answers a request: its own `*_resp` when it has one, else generic_nack. */
export function responseCommandId(requestId: number): number {
  const responseId = (requestId | RESPONSE_BIT) >>> 0;
  return !isResponse(requestId) && COMMAND_NAMES.has(responseId) ? responseId : COMMAND_ID.generic_nack;
}

function writeHeader(b: Buffer, commandId: number, commandStatus: number, sequence: number): number {
  let o = b.writeUInt32BE(b.length, 0);
  o = b.writeUInt32BE(commandId, o);
  o = b.writeUInt32BE(commandStatus, o);
  return b.writeUInt32BE(sequence, o);
}

function writeCString(b: Buffer, offset: number, bytes: Buffer): number {
  const end = offset + bytes.copy(b, offset);
  b[end] = 0;
  return end + 1;
}

/**
 * A PDU that is all header: enquire_link, unbind, their responses, generic_nack, and every
 * response with a non-zero command_status (the library leaves the body out of those as well).
 */
export function encodeHeaderPdu(commandId: number, sequence: number, commandStatus = 0): Buffer {
  const b = Buffer.allocUnsafe(PDU_HEADER_LENGTH);
  writeHeader(b, commandId, commandStatus, sequence);
  return b;
}

/**
 * deliver_sm_resp, or data_sm_resp when `commandId` says so: the same layout. Their message_id is
 * unused for what an SMSC delivers (SMPP 3.4 §4.6.2, §4.7.2), so it is sent empty.
 */
export function encodeDeliverSmResp(sequence: number, commandStatus: number, commandId: number = COMMAND_ID.deliver_sm_resp): Buffer {
  if (commandStatus !== 0) return encodeHeaderPdu(commandId, sequence, commandStatus);
  const b = Buffer.allocUnsafe(PDU_HEADER_LENGTH + 1);
  writeHeader(b, commandId, 0, sequence);
  b[PDU_HEADER_LENGTH] = 0;
  return b;
}

export type BindCommand = 'bind_transceiver' | 'bind_transmitter' | 'bind_receiver';

/** The bind_* body (SMPP 3.4 §4.1). */
export interface BindFields {
  system_id: string;
  password: string;
  system_type: string;
  interface_version: number;
  addr_ton: number;
  addr_npi: number;
  address_range: string;
}

export function encodeBind(command: BindCommand, f: BindFields, sequence: number): Buffer {
  const systemId = Buffer.from(f.system_id, 'ascii');
  const password = Buffer.from(f.password, 'ascii');
  const systemType = Buffer.from(f.system_type, 'ascii');
  const addressRange = Buffer.from(f.address_range, 'ascii');
  const length = PDU_HEADER_LENGTH + systemId.length + 1 + password.length + 1 + systemType.length + 1 + 3 + addressRange.length + 1;
  const b = Buffer.allocUnsafe(length);
  let o = writeHeader(b, COMMAND_ID[command], 0, sequence);
  o = writeCString(b, o, systemId);
  o = writeCString(b, o, password);
  o = writeCString(b, o, systemType);
  o = b.writeUInt8(f.interface_version, o);
  o = b.writeUInt8(f.addr_ton, o);
  o = b.writeUInt8(f.addr_npi, o);
  writeCString(b, o, addressRange);
  return b;
}

export interface PduHeader {
  commandLength: number;
  commandId: number;
  commandStatus: number;
  sequenceNumber: number;
}

/** Reads the header of a complete PDU. Throws SmppPduFormatError. */
export function decodeHeader(raw: Buffer): PduHeader {
  if (raw.length < PDU_HEADER_LENGTH) throw new SmppPduFormatError(`PDU of ${raw.length} octets is shorter than a header`);
  const commandLength = raw.readUInt32BE(0);
  if (commandLength > raw.length || commandLength < PDU_HEADER_LENGTH) {
    throw new SmppPduFormatError(`command_length ${commandLength} does not fit ${raw.length} octets`);
  }
  return {
    commandLength,
    commandId: raw.readUInt32BE(4),
    commandStatus: raw.readUInt32BE(8),
    sequenceNumber: raw.readUInt32BE(12),
  };
}

/**
 * The first C-string of the body (message_id, system_id), read the way the library reads it: to
 * the NUL or the end of the PDU, 'ascii' (high bits cleared). Undefined when the body is empty,
 * as SMSCs send it with a non-zero status.
 */
function leadingCString(raw: Buffer, end: number): string | undefined {
  if (end <= PDU_HEADER_LENGTH) return undefined;
  const nul = raw.indexOf(0, PDU_HEADER_LENGTH);
  return raw.toString('ascii', PDU_HEADER_LENGTH, nul < 0 || nul > end ? end : nul);
}

export interface SubmitSmResp extends PduHeader {
  messageId?: string;
}

/** Reads a submit_sm's response; `messageId` only from a submit_sm_resp (not a generic_nack). */
export function decodeSubmitSmResp(raw: Buffer): SubmitSmResp {
  const resp: SubmitSmResp = decodeHeader(raw);
  if (resp.commandId === COMMAND_ID.submit_sm_resp) {
    const messageId = leadingCString(raw, resp.commandLength);
    if (messageId !== undefined) resp.messageId = messageId;
  }
  return resp;
}

export interface BindResp extends PduHeader {
  /** The SMSC's system_id; TLVs after it (sc_interface_version) are not read. */
  systemId?: string;
}

/** Reads a bind's response; `systemId` only from a bind_*_resp (not a generic_nack). */
export function decodeBindResp(raw: Buffer): BindResp {
  const resp: BindResp = decodeHeader(raw);
  if (BIND_RESP_IDS.has(resp.commandId)) {
    const systemId = leadingCString(raw, resp.commandLength);
    if (systemId !== undefined) resp.systemId = systemId;
  }
  return resp;
}

const EMPTY = Buffer.alloc(0);

/**
 * Cuts a byte stream into PDUs by their command_length: `push` each chunk read, then take PDUs
 * with `next` until it returns null. A PDU that lies inside one chunk comes back as a view of it;
 * chunks are copied together only when a PDU spans them, once it is complete, so a PDU arriving in
 * many small pieces costs one copy, not one per piece.
 */
export class PduFramer {
  private buffer: Buffer = EMPTY;
  private offset = 0;
  private readonly tail: Buffer[] = [];
  private tailLength = 0;

  push(chunk: Buffer): void {
    if (this.offset === this.buffer.length && this.tail.length === 0) {
      this.buffer = chunk;
      this.offset = 0;
    } else {
      this.tail.push(chunk);
      this.tailLength += chunk.length;
    }
  }

  /** The next complete PDU, or null until more bytes arrive. Throws SmppPduFormatError on a command_length out of range. */
  next(): Buffer | null {
    if (!this.contiguous(4)) return null;
    const length = this.buffer.readUInt32BE(this.offset);
    if (length < PDU_HEADER_LENGTH || length > MAX_PDU_LENGTH) {
      throw new SmppPduFormatError(`command_length ${length} is outside ${PDU_HEADER_LENGTH}..${MAX_PDU_LENGTH}`);
    }
    if (!this.contiguous(length)) return null;
    const pdu = this.buffer.subarray(this.offset, this.offset + length);
    this.offset += length;
    return pdu;
  }

  /** Whether `n` bytes are readable at `offset`, joining the buffered chunks when that makes them so. */
  private contiguous(n: number): boolean {
    const available = this.buffer.length - this.offset;
    if (available >= n) return true;
    if (available + this.tailLength < n) return false;
    this.buffer = Buffer.concat([this.buffer.subarray(this.offset), ...this.tail.splice(0)]);
    this.offset = 0;
    this.tailLength = 0;
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading submit_sm / deliver_sm from raw bytes
// ---------------------------------------------------------------------------------------------

export interface UdhElement {
  iei: number;
  data: Buffer;
}

export interface ConcatInfo {
  ref: number;
  total: number;
  /** 1-based. */
  seq: number;
  /** 8 for IE 0x00, 16 for IE 0x08 and SAR TLVs. */
  refBits: 8 | 16;
}

export interface Udh {
  /** The header including its length octet. */
  raw: Buffer;
  elements: UdhElement[];
  /** From IE 0x00 or 0x08 when present. */
  concat: ConcatInfo | null;
}

/**
 * Typed view of a submit_sm or deliver_sm (both share the same body layout). Mandatory parameter
 * names follow the SMPP 3.4 spec; `short_message` is the raw octets (UDH included).
 */
export interface SmPdu {
  commandId: number;
  commandStatus: number;
  sequenceNumber: number;
  service_type: string;
  source_addr_ton: number;
  source_addr_npi: number;
  source_addr: string;
  dest_addr_ton: number;
  dest_addr_npi: number;
  destination_addr: string;
  esm_class: number;
  protocol_id: number;
  priority_flag: number;
  schedule_delivery_time: string;
  validity_period: string;
  registered_delivery: number;
  replace_if_present_flag: number;
  data_coding: number;
  sm_default_msg_id: number;
  short_message: Buffer;
  /** Parsed UDH when esm_class has UDHI (from short_message, or message_payload when that carries the text). */
  udh: Udh | null;
  /** The user data without UDH: from short_message, or message_payload when short_message is empty. */
  body: Buffer;
  message_payload?: Buffer;
  receipted_message_id?: string;
  message_state?: number;
  sar_msg_ref_num?: number;
  sar_total_segments?: number;
  sar_segment_seqnum?: number;
  /** Every TLV by tag (raw value). */
  tlvs: ReadonlyMap<number, Buffer>;
}

/** What onDeliver handlers receive. */
export type DeliverSm = SmPdu;

export class SmppPduFormatError extends Error {
  override name = 'SmppPduFormatError';
}

/** Parses a UDH (first octet = length of the rest). Returns null when it is malformed. */
export function parseUdh(bytes: Buffer): Udh | null {
  if (bytes.length < 1) return null;
  const udhl = bytes[0] ?? 0;
  if (udhl + 1 > bytes.length) return null;
  const raw = bytes.subarray(0, udhl + 1);
  const elements: UdhElement[] = [];
  let concat: ConcatInfo | null = null;
  let offset = 1;
  while (offset < raw.length) {
    const iei = raw[offset];
    const len = raw[offset + 1];
    if (iei === undefined || len === undefined || offset + 2 + len > raw.length) return null;
    const data = raw.subarray(offset + 2, offset + 2 + len);
    elements.push({ iei, data });
    if (iei === 0x00 && len === 3) {
      concat = { ref: data[0] ?? 0, total: data[1] ?? 0, seq: data[2] ?? 0, refBits: 8 };
    } else if (iei === 0x08 && len === 4) {
      concat = { ref: data.readUInt16BE(0), total: data[2] ?? 0, seq: data[3] ?? 0, refBits: 16 };
    }
    offset += 2 + len;
  }
  return { raw, elements, concat };
}

class Reader {
  offset: number;
  constructor(
    private readonly buf: Buffer,
    start: number,
    private readonly end: number,
  ) {
    this.offset = start;
  }
  u8(name: string): number {
    if (this.offset + 1 > this.end) throw new SmppPduFormatError(`PDU ends before ${name}`);
    return this.buf[this.offset++] ?? 0;
  }
  cstring(name: string): string {
    const nul = this.buf.indexOf(0, this.offset);
    if (nul < 0 || nul >= this.end) throw new SmppPduFormatError(`${name} is not NUL-terminated`);
    const value = this.buf.toString('latin1', this.offset, nul);
    this.offset = nul + 1;
    return value;
  }
  bytes(name: string, length: number): Buffer {
    if (this.offset + length > this.end) throw new SmppPduFormatError(`${name} runs past the end of the PDU`);
    const value = this.buf.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }
}

/** Reads a complete submit_sm, deliver_sm or data_sm PDU (header included). Throws SmppPduFormatError. */
export function parseSmPdu(raw: Buffer): SmPdu {
  if (raw.length < 16) throw new SmppPduFormatError(`PDU of ${raw.length} octets is shorter than a header`);
  const length = raw.readUInt32BE(0);
  if (length > raw.length || length < 16) throw new SmppPduFormatError(`command_length ${length} does not fit ${raw.length} octets`);
  const commandId = raw.readUInt32BE(4);
  const dataSm = commandId === COMMAND_ID.data_sm;
  if (commandId !== COMMAND_ID.submit_sm && commandId !== COMMAND_ID.deliver_sm && !dataSm) {
    throw new SmppPduFormatError(`command_id 0x${commandId.toString(16)} is not submit_sm, deliver_sm or data_sm`);
  }
  const r = new Reader(raw, 16, length);
  const service_type = r.cstring('service_type');
  const source_addr_ton = r.u8('source_addr_ton');
  const source_addr_npi = r.u8('source_addr_npi');
  const source_addr = r.cstring('source_addr');
  const dest_addr_ton = r.u8('dest_addr_ton');
  const dest_addr_npi = r.u8('dest_addr_npi');
  const destination_addr = r.cstring('destination_addr');
  const esm_class = r.u8('esm_class');
  // data_sm (§4.7.1) has no protocol_id, priority, schedule, validity, replace flag, default
  // message or short_message: its text is in message_payload. Read as the others, with those empty.
  const protocol_id = dataSm ? 0 : r.u8('protocol_id');
  const priority_flag = dataSm ? 0 : r.u8('priority_flag');
  const schedule_delivery_time = dataSm ? '' : r.cstring('schedule_delivery_time');
  const validity_period = dataSm ? '' : r.cstring('validity_period');
  const registered_delivery = r.u8('registered_delivery');
  const replace_if_present_flag = dataSm ? 0 : r.u8('replace_if_present_flag');
  const data_coding = r.u8('data_coding');
  const sm_default_msg_id = dataSm ? 0 : r.u8('sm_default_msg_id');
  const short_message = dataSm ? EMPTY : r.bytes('short_message', r.u8('sm_length'));
  const tlvs = new Map<number, Buffer>();
  while (r.offset + 4 <= length) {
    const tag = raw.readUInt16BE(r.offset);
    const len = raw.readUInt16BE(r.offset + 2);
    r.offset += 4;
    tlvs.set(tag, r.bytes(`TLV 0x${tag.toString(16).padStart(4, '0')}`, len));
  }

  const view: SmPdu = {
    commandId,
    commandStatus: raw.readUInt32BE(8),
    sequenceNumber: raw.readUInt32BE(12),
    service_type,
    source_addr_ton,
    source_addr_npi,
    source_addr,
    dest_addr_ton,
    dest_addr_npi,
    destination_addr,
    esm_class,
    protocol_id,
    priority_flag,
    schedule_delivery_time,
    validity_period,
    registered_delivery,
    replace_if_present_flag,
    data_coding,
    sm_default_msg_id,
    short_message,
    udh: null,
    body: short_message,
    tlvs,
  };

  const payload = tlvs.get(TLV.message_payload);
  if (payload) view.message_payload = payload;
  const receipted = tlvs.get(TLV.receipted_message_id);
  if (receipted) view.receipted_message_id = cstringValue(receipted);
  const state = tlvs.get(TLV.message_state);
  if (state && state.length >= 1) view.message_state = state[0] ?? 0;
  const sarRef = tlvs.get(TLV.sar_msg_ref_num);
  if (sarRef && sarRef.length >= 2) view.sar_msg_ref_num = sarRef.readUInt16BE(0);
  const sarTotal = tlvs.get(TLV.sar_total_segments);
  if (sarTotal && sarTotal.length >= 1) view.sar_total_segments = sarTotal[0] ?? 0;
  const sarSeq = tlvs.get(TLV.sar_segment_seqnum);
  if (sarSeq && sarSeq.length >= 1) view.sar_segment_seqnum = sarSeq[0] ?? 0;

  const userData = short_message.length === 0 && payload ? payload : short_message;
  view.body = userData;
  if (esm_class & ESM_CLASS_UDHI && userData.length > 0) {
    const udh = parseUdh(userData);
    if (udh) {
      view.udh = udh;
      view.body = userData.subarray(udh.raw.length);
    }
  }
  return view;
}

function cstringValue(buf: Buffer): string {
  const nul = buf.indexOf(0);
  return buf.toString('latin1', 0, nul < 0 ? buf.length : nul);
}

/**
 * Decodes user data by SMPP data_coding: 0 GSM-7 unpacked, 1 IA5/ASCII, 3 Latin-1, 8 UCS-2; values
 * ≥ 0x10 are read as GSM 03.38 data coding groups (alphabet bits). Unknown/binary → Latin-1.
 */
export function decodeUserData(dataCoding: number, bytes: Buffer): string {
  switch (smsAlphabet(dataCoding)) {
    case 'gsm7':
      // Octets above 0x7F are not septets; some SMSCs send Latin-1 with data_coding 0.
      return bytes.every((b) => b < 0x80) ? decodeGsm7Unpacked(bytes) : bytes.toString('latin1');
    case 'ucs2':
      // An odd trailing octet (a code unit cut in half) is dropped rather than failing the message.
      return decodeUcs2(bytes.length % 2 === 0 ? bytes : bytes.subarray(0, bytes.length - 1));
    default:
      return bytes.toString('latin1');
  }
}

function smsAlphabet(dc: number): 'gsm7' | 'ucs2' | 'octets' {
  if (dc === 0x00) return 'gsm7';
  if (dc === 0x08) return 'ucs2';
  if (dc < 0x10) return 'octets';
  if (dc < 0x80) {
    // General data coding groups 00xx / 01xx: bits 3-2 are the alphabet.
    const alphabet = (dc >> 2) & 0x03;
    return alphabet === 0 ? 'gsm7' : alphabet === 2 ? 'ucs2' : 'octets';
  }
  if (dc >= 0xf0) return dc & 0x04 ? 'octets' : 'gsm7';
  if (dc >= 0xe0) return 'ucs2';
  if (dc >= 0xc0) return 'gsm7';
  return 'octets';
}

// ---------------------------------------------------------------------------------------------
// Delivery receipts
// ---------------------------------------------------------------------------------------------

/** True when esm_class marks an SMSC delivery receipt (type 0001) or intermediate notification (1000). */
export function isDeliveryReceipt(esmClass: number): boolean {
  const type = esmClass & ESM_CLASS_TYPE_MASK;
  return type === ESM_CLASS_SMSC_RECEIPT || type === ESM_CLASS_INTERMEDIATE_NOTIFICATION;
}

/** What a receipt means for the attempt: a final state, or null (in progress / unknown: no change). */
export type ReceiptState = Extract<AttemptState, 'delivered' | 'undelivered' | 'rejected'> | null;

export interface ParsedReceipt {
  /** receipted_message_id TLV when present, else `id:` from the text; null when neither exists. */
  messageId: string | null;
  state: ReceiptState;
  /** The `stat:` word (upper-cased), or the message_state name when there is no text stat. */
  stat: string | null;
  /** `err:` from the text. */
  err: string | null;
  /** message_state TLV value, when present. */
  messageState: number | null;
  submitDate: string | null;
  doneDate: string | null;
  sub: string | null;
  dlvrd: string | null;
  /** `text:` (the first characters of the original message) when present. */
  text: string | null;
  /** True for an intermediate notification rather than a final SMSC receipt. */
  intermediate: boolean;
}

// A Map, not an object: looking a word up as an object key internalises it in place, and V8 (11.3,
// Node 20) then marks the word as a two-byte string, so the receipt's result_info built from it is
// two-byte too. One such text turned the joined event bodies of a whole status batch into a
// two-byte string: twice the memory, page faults, and a UTF-16 to UTF-8 conversion on every send.
const STAT_STATES = new Map<string, ReceiptState>([
  ['DELIVRD', 'delivered'],
  ['DELIVERED', 'delivered'],
  ['UNDELIV', 'undelivered'],
  ['UNDELIVERABLE', 'undelivered'],
  ['EXPIRED', 'undelivered'],
  ['DELETED', 'undelivered'],
  ['UNKNOWN', 'undelivered'],
  // Not SMPP's words, but written by some SMSCs and aggregators for a final failure.
  ['UNDELIVERED', 'undelivered'],
  ['FAILED', 'undelivered'],
  ['REJECTD', 'rejected'],
  ['REJECTED', 'rejected'],
  ['ENROUTE', null],
  ['ACCEPTD', null],
  ['ACCEPTED', null],
]);

/** SMPP message_state values (SMPP 3.4 §5.2.28, SKIPPED from 5.0). */
export const MESSAGE_STATES: Record<number, { name: string; state: ReceiptState }> = {
  0: { name: 'SCHEDULED', state: null },
  1: { name: 'ENROUTE', state: null },
  2: { name: 'DELIVERED', state: 'delivered' },
  3: { name: 'EXPIRED', state: 'undelivered' },
  4: { name: 'DELETED', state: 'undelivered' },
  5: { name: 'UNDELIVERABLE', state: 'undelivered' },
  6: { name: 'ACCEPTED', state: null },
  7: { name: 'UNKNOWN', state: 'undelivered' },
  8: { name: 'REJECTED', state: 'rejected' },
  9: { name: 'SKIPPED', state: 'undelivered' },
};

/** Maps a `stat:` word to a state; unknown words → null (no change). */
export function receiptStatState(stat: string): ReceiptState {
  return STAT_STATES.get(stat.toUpperCase()) ?? null;
}

export type ReceiptInput = Pick<SmPdu, 'esm_class' | 'data_coding' | 'body'> &
  Partial<Pick<SmPdu, 'receipted_message_id' | 'message_state'>>;

/**
 * Parses a delivery receipt; returns null when the PDU is not one (esm_class message type is
 * neither 0001 nor 1000). The state comes from the text's `stat:` when it is a word we know,
 * otherwise from the message_state TLV (an unknown word without the TLV changes nothing); the id
 * from the receipted_message_id TLV, otherwise from `id:`.
 */
export function parseReceipt(pdu: ReceiptInput): ParsedReceipt | null {
  if (!isDeliveryReceipt(pdu.esm_class)) return null;
  // Receipt text is ASCII in practice (even with data_coding 0), so only UCS-2 is decoded as such.
  const text = smsAlphabet(pdu.data_coding) === 'ucs2' ? decodeUserData(DATA_CODING_UCS2, pdu.body) : pdu.body.toString('latin1');
  const fields = parseReceiptText(text);
  const tlvId = pdu.receipted_message_id?.trim();
  const messageState = pdu.message_state ?? null;
  let state: ReceiptState = null;
  let stat: string | null = null;
  if (fields.stat) {
    stat = fields.stat.toUpperCase();
    state = receiptStatState(stat);
    // A word of its own (not one of STAT_STATES) with a message_state TLV beside it: the TLV,
    // whose values the standard fixes, says what happened; the word stays in the result text.
    if (messageState !== null && !STAT_STATES.has(stat)) state = MESSAGE_STATES[messageState]?.state ?? null;
  } else if (messageState !== null) {
    const known = MESSAGE_STATES[messageState];
    stat = known ? known.name : `STATE_${messageState}`;
    state = known ? known.state : null;
  }
  return {
    messageId: tlvId ? tlvId : fields.id,
    state,
    stat,
    err: fields.err,
    messageState,
    submitDate: fields.submitDate,
    doneDate: fields.doneDate,
    sub: fields.sub,
    dlvrd: fields.dlvrd,
    text: fields.text,
    intermediate: (pdu.esm_class & ESM_CLASS_TYPE_MASK) === ESM_CLASS_INTERMEDIATE_NOTIFICATION,
  };
}

interface ReceiptTextFields {
  id: string | null;
  sub: string | null;
  dlvrd: string | null;
  submitDate: string | null;
  doneDate: string | null;
  stat: string | null;
  err: string | null;
  text: string | null;
}

const RECEIPT_ID_RE = /(?:^|\s)id:\s*([^\s]+)/i;
const RECEIPT_SUB_RE = /(?:^|\s)sub:\s*([^\s]+)/i;
const RECEIPT_DLVRD_RE = /(?:^|\s)dlvrd:\s*([^\s]+)/i;
const RECEIPT_SUBMIT_DATE_RE = /(?:^|\s)submit[ _]date:\s*(\d+)/i;
const RECEIPT_DONE_DATE_RE = /(?:^|\s)done[ _]date:\s*(\d+)/i;
const RECEIPT_STAT_RE = /(?:^|\s)stat:\s*([A-Za-z_]+)/i;
const RECEIPT_ERR_RE = /(?:^|\s)err:\s*([^\s]+)/i;

// Module-level rather than a closure per receipt (see hexReading below). The expressions are not
// global, so exec keeps no lastIndex between calls.
function firstGroup(re: RegExp, text: string): string | null {
  return re.exec(text)?.[1] ?? null;
}

/** Reads the SMPP 3.4 Appendix B receipt text (keys case-insensitive; `text:` taken to the end). */
export function parseReceiptText(text: string): ReceiptTextFields {
  const textAt = text.search(/(?:^|\s)text:/i);
  const head = textAt >= 0 ? text.slice(0, textAt) : text;
  const tail = textAt >= 0 ? text.slice(textAt).replace(/^\s*text:/i, '') : null;
  return {
    id: firstGroup(RECEIPT_ID_RE, head),
    sub: firstGroup(RECEIPT_SUB_RE, head),
    dlvrd: firstGroup(RECEIPT_DLVRD_RE, head),
    submitDate: firstGroup(RECEIPT_SUBMIT_DATE_RE, head),
    doneDate: firstGroup(RECEIPT_DONE_DATE_RE, head),
    stat: firstGroup(RECEIPT_STAT_RE, head),
    err: firstGroup(RECEIPT_ERR_RE, head),
    text: tail,
  };
}

// ---------------------------------------------------------------------------------------------
// Message id matching
// ---------------------------------------------------------------------------------------------

/**
 * How an SMSC writes message ids: `hex`, `dec`(imal), `string` (opaque), or `auto` (unknown).
 * Set per connection and per direction (submit_sm_resp vs receipt) when known.
 */
export type MessageIdForm = 'auto' | 'hex' | 'dec' | 'string';

const HEX_RE = /^[0-9a-f]+$/i;
const DEC_RE = /^[0-9]+$/;

/**
 * Canonical lookup keys for a message id. Keys are `hex:<value in lowercase hex, no leading
 * zeros>` for ids read as numbers, or `str:<lowercased id>` for opaque ids.
 *
 * - `hex`: the id is read as hexadecimal (`00001A2B`, `1a2b` → `hex:1a2b`).
 * - `dec`: the id is read as decimal (`6699`, `006699` → `hex:1a2b`).
 * - `string`: `str:<lowercase>`.
 * - `auto` (default): a hex-only id with a letter a-f → its hex key; an all-digit id → two keys,
 *   first its hex reading (the same-representation key, i.e. the digits without leading zeros),
 *   then its decimal reading converted to hex; anything else → `str:`.
 * Ids that do not fit the requested form (e.g. `abc` with `dec`) fall back to `auto`.
 *
 * Matching rule: the id stored from submit_sm_resp and the id from a receipt refer to the same
 * message when their key lists intersect. Element 0 is always the same-representation key, so
 * when several stored ids match, the one whose key[0] equals the receipt's key[0] wins. With
 * `auto` on both sides a decimal receipt id can match a different message whose hex id has the
 * same digits, so the SMPP carrier does not match by intersection: it learns how the connection's
 * SMSC writes its ids (id-forms.ts, receipt-ids.ts), or takes the forms set per connection (e.g.
 * submit `hex`, receipt `dec`), and then reads each receipt id one way only.
 */
export function normalizeMessageId(id: string, form: MessageIdForm = 'auto'): string[] {
  const s = id.replace(/\0+$/, '').trim();
  if (s === '') return [];
  if (form === 'string') return [`str:${s.toLowerCase()}`];
  if (form === 'hex' && HEX_RE.test(s)) return [hexReading(s)];
  if (form === 'dec' && DEC_RE.test(s)) return [decReading(s)];
  if (DEC_RE.test(s)) {
    const keys = [hexReading(s), decReading(s)];
    return keys[0] === keys[1] ? [keys[0] as string] : keys;
  }
  if (HEX_RE.test(s)) return [hexReading(s)];
  return [`str:${s.toLowerCase()}`];
}

// Module-level rather than closures per call (their optimised code was dropped at every full
// collection; docs/architecture.md, "Hot loops").
function hexReading(s: string): string {
  return `hex:${BigInt(`0x${s}`).toString(16)}`;
}
function decReading(s: string): string {
  return `hex:${BigInt(s).toString(16)}`;
}

/** Whether two ids name the same message under the rule of `normalizeMessageId`. */
export function messageIdsMatch(a: string, b: string, formA: MessageIdForm = 'auto', formB: MessageIdForm = 'auto'): boolean {
  const keys = new Set(normalizeMessageId(a, formA));
  return normalizeMessageId(b, formB).some((k) => keys.has(k));
}

// ---------------------------------------------------------------------------------------------
// Inbound (MO) reassembly
// ---------------------------------------------------------------------------------------------

/** What reassembly needs from a deliver_sm (a DeliverSm satisfies it). */
export type InboundPart = Pick<SmPdu, 'source_addr' | 'destination_addr' | 'data_coding' | 'udh' | 'body'> &
  Partial<Pick<SmPdu, 'sar_msg_ref_num' | 'sar_total_segments' | 'sar_segment_seqnum'>>;

export interface InboundMessage {
  source: string;
  destination: string;
  text: string;
  /** Number of parts the message was sent in (1 when not concatenated). */
  parts: number;
  /** False only for messages flushed by `flushExpired` with parts missing. */
  complete: boolean;
  /** Sequence numbers (1-based) that never arrived; empty when complete. */
  missing: number[];
}

interface PendingMessage {
  source: string;
  destination: string;
  total: number;
  firstAt: number;
  parts: Map<number, { dataCoding: number; body: Buffer }>;
}

export interface InboundReassemblerOptions {
  /** Incomplete messages older than this are returned by flushExpired; default 10 minutes. */
  maxAgeMs?: number;
  /** Cap on incomplete messages kept; the oldest is flushed first; default 10 000. */
  maxPending?: number;
  now?: () => number;
}

/** Concatenation info from UDH IE 0x00 / 0x08, else from SAR TLVs; null for a single message. */
export function concatInfo(part: InboundPart): ConcatInfo | null {
  if (part.udh?.concat) return part.udh.concat;
  if (
    part.sar_msg_ref_num !== undefined &&
    part.sar_total_segments !== undefined &&
    part.sar_segment_seqnum !== undefined
  ) {
    return { ref: part.sar_msg_ref_num, total: part.sar_total_segments, seq: part.sar_segment_seqnum, refBits: 16 };
  }
  return null;
}

/**
 * Collects concatenated MO parts keyed by (source, destination, reference width, reference,
 * total). A part completes its message when every seq 1..total has arrived (in any order;
 * duplicates replace the earlier copy). Bodies are concatenated before decoding, so a UCS-2
 * surrogate pair or GSM-7 escape split across parts decodes correctly.
 */
export class InboundReassembler {
  private readonly pending = new Map<string, PendingMessage>();
  private readonly maxAgeMs: number;
  private readonly maxPending: number;
  private readonly now: () => number;

  constructor(options: InboundReassemblerOptions = {}) {
    this.maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.maxPending = options.maxPending ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  /** Adds one part; returns the whole message when it is complete (or was never split), else null. */
  add(part: InboundPart): InboundMessage | null {
    const info = concatInfo(part);
    if (!info || info.total <= 1 || info.seq < 1 || info.seq > info.total) {
      return {
        source: part.source_addr,
        destination: part.destination_addr,
        text: decodeUserData(part.data_coding, part.body),
        parts: 1,
        complete: true,
        missing: [],
      };
    }
    const key = [part.source_addr, part.destination_addr, info.refBits, info.ref, info.total].join('\u0000');
    let entry = this.pending.get(key);
    if (!entry) {
      if (this.pending.size >= this.maxPending) this.evictOldest();
      entry = { source: part.source_addr, destination: part.destination_addr, total: info.total, firstAt: this.now(), parts: new Map() };
      this.pending.set(key, entry);
    }
    entry.parts.set(info.seq, { dataCoding: part.data_coding, body: part.body });
    if (entry.parts.size < entry.total) return null;
    this.pending.delete(key);
    return assemble(entry);
  }

  /** Removes incomplete messages older than maxAgeMs and returns what arrived of them. */
  flushExpired(now: number = this.now()): InboundMessage[] {
    const out: InboundMessage[] = [];
    for (const [key, entry] of this.pending) {
      if (now - entry.firstAt >= this.maxAgeMs) {
        this.pending.delete(key);
        out.push(assemble(entry));
      }
    }
    return out;
  }

  private evictOldest(): void {
    const first = this.pending.keys().next();
    if (!first.done) this.pending.delete(first.value);
  }
}

function assemble(entry: PendingMessage): InboundMessage {
  const missing: number[] = [];
  const chunks: { dataCoding: number; body: Buffer }[] = [];
  for (let seq = 1; seq <= entry.total; seq++) {
    const p = entry.parts.get(seq);
    if (p) chunks.push(p);
    else missing.push(seq);
  }
  // Decode runs of parts with the same data_coding together (they normally all match).
  let text = '';
  let run: Buffer[] = [];
  let runCoding: number | null = null;
  for (const c of chunks) {
    if (runCoding !== null && c.dataCoding !== runCoding) {
      text += decodeUserData(runCoding, Buffer.concat(run));
      run = [];
    }
    runCoding = c.dataCoding;
    run.push(c.body);
  }
  if (runCoding !== null) text += decodeUserData(runCoding, Buffer.concat(run));
  return {
    source: entry.source,
    destination: entry.destination,
    text,
    parts: entry.total,
    complete: missing.length === 0,
    missing,
  };
}

/** Reassembles a batch of parts (any order) and returns the messages they complete, in completion order. */
export function reassembleInbound(parts: Iterable<InboundPart>, reassembler = new InboundReassembler()): InboundMessage[] {
  const out: InboundMessage[] = [];
  for (const part of parts) {
    const message = reassembler.add(part);
    if (message) out.push(message);
  }
  return out;
}

/**
 * An MO address as the inbound path reads it: a national number (TON 2) in the connection's
 * `country` (SMPP_URL `country=CZ`) as international digits, so that it matches the numbers we
 * send from and to (`777555111` → `420777555111`); anything else (international, alphanumeric,
 * short codes, an unknown TON, a national number without a country) as the SMSC wrote it.
 */
export function moAddress(addr: string, ton: number, country: string | null): string {
  if (ton !== TON_NATIONAL || country === null) return addr;
  return normalizePhone(addr, country) ?? addr;
}
