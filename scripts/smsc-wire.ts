/**
 * The SMSC simulator's side of the SMPP 3.4 wire: one TCP connection read into PDUs and written
 * back in per-tick batches, and the PDUs an SMSC sends (bind and submit responses, deliver_sm,
 * its own requests and their answers). The simulator stands in for a carrier on another machine,
 * so it should cost the benchmark's machine as little as the service it measures: a PDU library
 * per PDU, a timer per receipt and a socket write per PDU cost it about 80 µs per recipient.
 *
 * Encoding is written here for the SMSC direction; the service's codec (shared/carriers/smpp/pdu.ts)
 * is only used to read submit_sm and to cut the byte stream into PDUs, and the unit tests decode
 * what this file writes with the `smpp` library, so the two ends do not check each other with one
 * piece of code.
 */
import type { Socket } from 'node:net';
import { COMMAND_ID, PDU_HEADER_LENGTH, PduFramer, TLV } from '../shared/carriers/smpp/pdu.js';

/** A PDU read from the client: its header, and the whole PDU (a view of the socket's bytes). */
export interface WirePdu {
  commandId: number;
  commandStatus: number;
  sequenceNumber: number;
  raw: Buffer;
}

function writeHeader(b: Buffer, commandId: number, commandStatus: number, sequence: number): number {
  b.writeUInt32BE(b.length, 0);
  b.writeUInt32BE(commandId, 4);
  b.writeUInt32BE(commandStatus, 8);
  b.writeUInt32BE(sequence, 12);
  return PDU_HEADER_LENGTH;
}

/** A PDU without a body: enquire_link, unbind, their responses, and any response with an error status. */
export function encodeBare(commandId: number, sequence: number, commandStatus = 0): Buffer {
  const b = Buffer.allocUnsafe(PDU_HEADER_LENGTH);
  writeHeader(b, commandId, commandStatus, sequence);
  return b;
}

/**
 * A response whose body is one C-string (submit_sm_resp's message_id, bind_*_resp's system_id).
 * With an error status the body is left out, as SMSCs (and the `smpp` library) do.
 */
export function encodeCStringResponse(commandId: number, sequence: number, commandStatus: number, value: string): Buffer {
  if (commandStatus !== 0) return encodeBare(commandId, sequence, commandStatus);
  const length = Buffer.byteLength(value, 'latin1');
  const b = Buffer.allocUnsafe(PDU_HEADER_LENGTH + length + 1);
  let o = writeHeader(b, commandId, 0, sequence);
  o += b.write(value, o, 'latin1');
  b[o] = 0;
  return b;
}

/** The fields of a deliver_sm the simulator sends (receipts and mobile-originated messages). */
export interface DeliverSmFields {
  source_addr_ton: number;
  source_addr_npi: number;
  source_addr: string;
  dest_addr_ton: number;
  dest_addr_npi: number;
  destination_addr: string;
  esm_class: number;
  data_coding: number;
  /** UDH included when esm_class has the UDH indicator. */
  short_message: Buffer;
  receipted_message_id?: string;
  message_state?: number;
}

/**
 * What an SMSC delivers (receipts, MO): deliver_sm (SMPP 3.4 §4.6.1; service_type, schedule and
 * validity empty, protocol_id, priority and registered_delivery 0), or the same message as data_sm
 * (§4.7.1), as some SMSCs send them: no short_message field, the text (UDH included when
 * esm_class has the UDH indicator) in the message_payload TLV.
 */
function encodeDelivery(command: 'deliver_sm' | 'data_sm', f: DeliverSmFields, sequence: number): Buffer {
  const dataSm = command === 'data_sm';
  const source = Buffer.byteLength(f.source_addr, 'latin1');
  const destination = Buffer.byteLength(f.destination_addr, 'latin1');
  const receipted = f.receipted_message_id === undefined ? -1 : Buffer.byteLength(f.receipted_message_id, 'latin1');
  // Header, service_type, the two addresses with their ton/npi, esm_class; then deliver_sm's eight
  // octets and empty C-strings with sm_length and its short_message, or data_sm's two octets and the payload TLV.
  let length = PDU_HEADER_LENGTH + 1 + 2 + source + 1 + 2 + destination + 1 + 1 + (dataSm ? 2 + 4 : 8 + 1) + f.short_message.length;
  if (receipted >= 0) length += 4 + receipted + 1;
  if (f.message_state !== undefined) length += 4 + 1;
  const b = Buffer.allocUnsafe(length);
  let o = writeHeader(b, COMMAND_ID[command], 0, sequence);
  b[o++] = 0; // service_type ''
  b[o++] = f.source_addr_ton;
  b[o++] = f.source_addr_npi;
  o += b.write(f.source_addr, o, 'latin1');
  b[o++] = 0;
  b[o++] = f.dest_addr_ton;
  b[o++] = f.dest_addr_npi;
  o += b.write(f.destination_addr, o, 'latin1');
  b[o++] = 0;
  b[o++] = f.esm_class;
  if (dataSm) {
    b[o++] = 0; // registered_delivery
    b[o++] = f.data_coding;
    b.writeUInt16BE(TLV.message_payload, o);
    b.writeUInt16BE(f.short_message.length, o + 2);
    o += 4;
  } else {
    b[o++] = 0; // protocol_id
    b[o++] = 0; // priority_flag
    b[o++] = 0; // schedule_delivery_time ''
    b[o++] = 0; // validity_period ''
    b[o++] = 0; // registered_delivery
    b[o++] = 0; // replace_if_present_flag
    b[o++] = f.data_coding;
    b[o++] = 0; // sm_default_msg_id
    b[o++] = f.short_message.length;
  }
  o += f.short_message.copy(b, o);
  if (receipted >= 0) {
    b.writeUInt16BE(TLV.receipted_message_id, o);
    b.writeUInt16BE(receipted + 1, o + 2);
    o += 4;
    o += b.write(f.receipted_message_id ?? '', o, 'latin1');
    b[o++] = 0;
  }
  if (f.message_state !== undefined) {
    b.writeUInt16BE(TLV.message_state, o);
    b.writeUInt16BE(1, o + 2);
    b[o + 4] = f.message_state;
  }
  return b;
}

/** deliver_sm (see `encodeDelivery`). */
export const encodeDeliverSm = (f: DeliverSmFields, sequence: number): Buffer => encodeDelivery('deliver_sm', f, sequence);
/** data_sm (see `encodeDelivery`). */
export const encodeDataSm = (f: DeliverSmFields, sequence: number): Buffer => encodeDelivery('data_sm', f, sequence);

/** system_id and password of a bind_* request (the first two C-strings of its body). */
export function decodeBindRequest(raw: Buffer): { systemId: string; password: string } {
  const end = raw.readUInt32BE(0);
  const read = (start: number): [string, number] => {
    const nul = raw.indexOf(0, start);
    const stop = nul < 0 || nul >= end ? end : nul;
    return [raw.toString('latin1', start, stop), stop + 1];
  };
  const [systemId, next] = read(PDU_HEADER_LENGTH);
  const [password] = next < end ? read(next) : [''];
  return { systemId, password };
}

/**
 * One client connection: PDUs in (`onPdu`), PDUs out in one socket write per turn of the event
 * loop (`send`), and `end` once what was sent has been flushed.
 */
export class SimWire {
  private readonly framer = new PduFramer();
  private outbox: Buffer[] = [];
  private flushScheduled = false;
  private endAfterFlush = false;
  closed = false;

  constructor(
    readonly socket: Socket,
    onPdu: (pdu: WirePdu) => void,
    onClose: () => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.framer.push(chunk);
      try {
        for (let raw = this.framer.next(); raw !== null; raw = this.framer.next()) {
          onPdu({ commandId: raw.readUInt32BE(4), commandStatus: raw.readUInt32BE(8), sequenceNumber: raw.readUInt32BE(12), raw });
        }
      } catch {
        socket.destroy(); // a command_length out of range: the stream cannot be read further
      }
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.closed = true;
      this.outbox = [];
      onClose();
    });
  }

  /** Queues a PDU; false when the connection is closed or its end was written (the PDU would be lost). */
  send(pdu: Buffer): boolean {
    if (this.closed || this.socket.destroyed || this.socket.writableEnded) return false;
    this.outbox.push(pdu);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  /** Closes the connection once the PDUs sent so far are written. */
  end(): void {
    this.endAfterFlush = true;
    if (!this.flushScheduled) this.flush();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private flush(): void {
    this.flushScheduled = false;
    const list = this.outbox;
    this.outbox = [];
    if (!this.closed && !this.socket.destroyed && list.length > 0) {
      this.socket.write(list.length === 1 ? list[0]! : Buffer.concat(list));
    }
    if (this.endAfterFlush && !this.socket.destroyed) this.socket.end();
  }
}

/**
 * Callbacks due a fixed delay after they were added, on one timer: entries of one delay come due
 * in the order they were added, so the queue is a FIFO and only its head needs a timer.
 */
export class DelayLine {
  private readonly items: Array<{ due: number; run: () => void }> = [];
  private head = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly delayMs: number) {}

  add(run: () => void): void {
    this.items.push({ due: Date.now() + this.delayMs, run });
    if (!this.timer) this.arm();
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.items.length = 0;
    this.head = 0;
  }

  private arm(): void {
    const next = this.items[this.head];
    if (!next) {
      this.items.length = 0;
      this.head = 0;
      return;
    }
    this.timer = setTimeout(() => this.fire(), Math.max(0, next.due - Date.now()));
  }

  private fire(): void {
    this.timer = null;
    const now = Date.now();
    while (this.head < this.items.length && this.items[this.head]!.due <= now) {
      const item = this.items[this.head]!;
      this.items[this.head] = undefined as unknown as { due: number; run: () => void };
      this.head++;
      item.run();
    }
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
    this.arm();
  }
}
