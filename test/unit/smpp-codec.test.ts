/**
 * The session's own PDU codec (shared/carriers/smpp/pdu.ts) against the `smpp` library it
 * replaced: every PDU we encode must be the library's bytes for the same fields, and every PDU we
 * decode must read as the library reads it. Plus the framer, and the session's answers over a raw
 * socket (several PDUs per chunk, a bad command_length).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { describe, it } from 'node:test';
import smpp from 'smpp';
import {
  COMMAND_ID,
  MAX_PDU_LENGTH,
  PduFramer,
  SmppPduFormatError,
  buildSubmitSms,
  decodeBindResp,
  decodeHeader,
  decodeSubmitSmResp,
  decodeUserData,
  encodeBind,
  encodeDeliverSmResp,
  encodeHeaderPdu,
  encodeSubmitSm,
  parseReceipt,
  parseSmPdu,
  responseCommandId,
  type BindCommand,
  type BindFields,
  type SubmitSmFields,
  type SubmitSmTlvs,
} from '../../shared/carriers/smpp/pdu.js';
import { SmppSession } from '../../shared/carriers/smpp/session.js';
import { encodeGsm7Unpacked, encodeUcs2 } from '../../shared/sms/gsm7.js';

/** The library's encoding of `command` with these fields and sequence number. */
function lib(command: string, fields: smpp.PduFields, sequence: number): Buffer {
  const pdu = new smpp.PDU(command, fields);
  pdu.sequence_number = sequence;
  return pdu.toBuffer();
}

/** The library's answer to a request, as `pdu.response()` builds it. */
function libResponse(request: Buffer, options?: smpp.PduFields): Buffer {
  const pdu = smpp.PDU.fromBuffer(request);
  assert.ok(pdu);
  return pdu.response(options).toBuffer();
}

function libDecode(raw: Buffer): smpp.PDU {
  const pdu = smpp.PDU.fromBuffer(raw);
  assert.ok(pdu, 'the library decodes it');
  return pdu;
}

function header(commandId: number, sequence: number, status = 0, body = Buffer.alloc(0)): Buffer {
  const b = Buffer.alloc(16 + body.length);
  b.writeUInt32BE(b.length, 0);
  b.writeUInt32BE(commandId, 4);
  b.writeUInt32BE(status, 8);
  b.writeUInt32BE(sequence, 12);
  body.copy(b, 16);
  return b;
}

function sms(text: string): SubmitSmFields {
  const [fields] = buildSubmitSms({ destination: '447700900000', sender: 'Acme', encoding: 'gsm7', parts: [text] });
  assert.ok(fields);
  return fields;
}

// -------------------------------------------------------------------------------------------------
// Encoding
// -------------------------------------------------------------------------------------------------

describe('encodeBind', () => {
  const base: BindFields = {
    system_id: 'switchboard',
    password: 'secret',
    system_type: '',
    interface_version: 0x34,
    addr_ton: 0,
    addr_npi: 0,
    address_range: '',
  };
  const cases: Array<[string, BindFields]> = [
    ['defaults', base],
    ['system_type, addressing', { ...base, system_type: 'VMA', addr_ton: 1, addr_npi: 1, address_range: '^4477.*' }],
    ['empty credentials', { ...base, system_id: '', password: '' }],
    ['longest credentials, interface_version 0x33', { ...base, system_id: 'x'.repeat(15), password: 'p'.repeat(8), system_type: 't'.repeat(12), interface_version: 0x33 }],
    ['printable ASCII punctuation', { ...base, system_id: 'a@b:c', password: "p%/?#'\"" }],
  ];
  const commands: BindCommand[] = ['bind_transceiver', 'bind_transmitter', 'bind_receiver'];
  for (const command of commands) {
    for (const [what, fields] of cases) {
      it(`${command}: ${what}`, () => {
        assert.deepEqual(encodeBind(command, fields, 1), lib(command, { ...fields }, 1));
        assert.deepEqual(encodeBind(command, fields, 0x7fffffff), lib(command, { ...fields }, 0x7fffffff));
      });
    }
  }
});

describe('encodeHeaderPdu', () => {
  const requests: Array<[string, number]> = [
    ['enquire_link', COMMAND_ID.enquire_link],
    ['unbind', COMMAND_ID.unbind],
  ];
  for (const [command, id] of requests) {
    it(`${command} and its response`, () => {
      for (const seq of [1, 2, 0x1234, 0x7fffffff]) {
        const request = lib(command, {}, seq);
        assert.deepEqual(encodeHeaderPdu(id, seq), request);
        assert.deepEqual(encodeHeaderPdu(responseCommandId(id), seq), libResponse(request));
      }
    });
  }

  // What the session answers to a request it does not handle: ESME_RINVCMDID in the command's own
  // response when the library knows the command, generic_nack otherwise.
  const refused: Array<[string, Buffer]> = [
    ['data_sm', lib('data_sm', { source_addr: '1', destination_addr: '2', data_coding: 0 }, 7)],
    ['submit_sm', lib('submit_sm', { source_addr: '1', destination_addr: '2', data_coding: 0, short_message: Buffer.from('x') }, 8)],
    ['query_sm', lib('query_sm', { message_id: 'abc' }, 9)],
    ['cancel_sm', lib('cancel_sm', { message_id: 'abc' }, 10)],
    ['replace_sm', lib('replace_sm', { message_id: 'abc', short_message: Buffer.alloc(0) }, 11)],
    ['bind_transceiver', lib('bind_transceiver', { system_id: 'a', password: 'b' }, 12)],
    ['submit_multi', lib('submit_multi', { data_coding: 0, short_message: Buffer.alloc(0) }, 13)],
    ['broadcast_sm', lib('broadcast_sm', { message_id: 'x', data_coding: 0 }, 14)],
    ['unknown command 0x00000222', header(0x00000222, 15)],
    ['unknown command 0x00000000', header(0x00000000, 16)],
    ['unknown command 0x7fffffff with a body', header(0x7fffffff, 17, 0, Buffer.from('junk'))],
  ];
  for (const [what, request] of refused) {
    it(`refuses ${what} as the library does`, () => {
      const { commandId, sequenceNumber } = decodeHeader(request);
      const ours = encodeHeaderPdu(responseCommandId(commandId), sequenceNumber, 0x03);
      assert.deepEqual(ours, libResponse(request, { command_status: 0x03 }));
    });
  }

  it('generic_nack with a status', () => {
    for (const status of [0x03, 0x01, 0xff]) {
      assert.deepEqual(encodeHeaderPdu(COMMAND_ID.generic_nack, 99, status), lib('generic_nack', { command_status: status }, 99));
    }
  });
});

describe('encodeDeliverSmResp', () => {
  const deliver = lib('deliver_sm', { source_addr: '447700900000', destination_addr: '12345', data_coding: 0, short_message: Buffer.from('hi') }, 4242);
  for (const status of [0, 0x64, 0x65, 0x08]) {
    it(`status 0x${status.toString(16)}`, () => {
      assert.deepEqual(encodeDeliverSmResp(4242, status), libResponse(deliver, status === 0 ? {} : { command_status: status }));
    });
  }
});

describe('encodeDeliverSmResp for a data_sm', () => {
  const data = lib('data_sm', { source_addr: '447700900000', destination_addr: '12345', esm_class: 0x04, data_coding: 0, receipted_message_id: '1A', message_state: 2 }, 4243);
  for (const status of [0, 0x64]) {
    it(`data_sm_resp, status 0x${status.toString(16)}`, () => {
      assert.deepEqual(encodeDeliverSmResp(4243, status, COMMAND_ID.data_sm_resp), libResponse(data, status === 0 ? {} : { command_status: status }));
    });
  }
});

describe('encodeSubmitSm with TLVs', () => {
  const payload = Buffer.from('x'.repeat(400), 'ascii');
  const cases: Array<[string, SubmitSmFields, SubmitSmTlvs]> = [
    ['no TLVs (empty object)', sms('Hello'), {}],
    ['message_payload, empty short_message', { ...sms(''), short_message: Buffer.alloc(0) }, { message_payload: payload }],
    ['SAR concatenation', sms('part two'), { sar_msg_ref_num: 0xbeef, sar_total_segments: 3, sar_segment_seqnum: 2 }],
    ['SAR in another key order', sms('part one'), { sar_segment_seqnum: 1, sar_total_segments: 3, sar_msg_ref_num: 7 }],
    ['ports and references', sms('app'), { source_port: 1, dest_port: 0x1580, user_message_reference: 0xffff, payload_type: 1 }],
    [
      'every single-octet TLV',
      sms('flags'),
      {
        source_addr_subunit: 1,
        dest_addr_subunit: 2,
        more_messages_to_send: 1,
        privacy_indicator: 3,
        user_response_code: 255,
        language_indicator: 4,
        display_time: 2,
        ms_msg_wait_facilities: 0x80,
        number_of_messages: 99,
        its_reply_type: 5,
        ussd_service_op: 17,
      },
    ],
    [
      'octet-string TLVs and sms_signal',
      sms('octets'),
      {
        source_subaddress: Buffer.from([0xa0, 1, 2]),
        dest_subaddress: Buffer.from([0x80, 9]),
        ms_validity: Buffer.from([3]),
        its_session_info: Buffer.from([0x12, 0x34]),
        sms_signal: 0x0102,
      },
    ],
    ['UDH parts keep esm_class 0x40 with TLVs', buildSubmitSms({ destination: '1555', sender: 'X', encoding: 'ucs2', parts: ['Ж', 'Ω'], reference: 9 })[1] as SubmitSmFields, { user_message_reference: 1 }],
    ['zero-length message_payload', sms(''), { message_payload: Buffer.alloc(0) }],
  ];
  for (const [what, fields, tlvs] of cases) {
    it(what, () => {
      assert.deepEqual(encodeSubmitSm(fields, 31337, tlvs), lib('submit_sm', { ...tlvs, ...fields }, 31337));
    });
  }

  it('skips TLVs set to undefined', () => {
    assert.deepEqual(encodeSubmitSm(sms('a'), 1, { dest_port: undefined, source_port: 5 }), encodeSubmitSm(sms('a'), 1, { source_port: 5 }));
  });

  it('refuses TLVs it does not know, values of the wrong type or out of range', () => {
    assert.throws(() => encodeSubmitSm(sms('a'), 1, { callback_num: Buffer.from('1') } as unknown as SubmitSmTlvs), RangeError);
    assert.throws(() => encodeSubmitSm(sms('a'), 1, { message_payload: 'text' } as unknown as SubmitSmTlvs), TypeError);
    assert.throws(() => encodeSubmitSm(sms('a'), 1, { sar_msg_ref_num: Buffer.from([1, 2]) } as unknown as SubmitSmTlvs), TypeError);
    assert.throws(() => encodeSubmitSm(sms('a'), 1, { sar_total_segments: 256 }), RangeError);
    assert.throws(() => encodeSubmitSm(sms('a'), 1, { message_payload: Buffer.alloc(65_536) }), RangeError);
  });
});

// -------------------------------------------------------------------------------------------------
// Decoding
// -------------------------------------------------------------------------------------------------

describe('decodeHeader', () => {
  const buffers: Array<[string, Buffer]> = [
    ['enquire_link', lib('enquire_link', {}, 1)],
    ['enquire_link_resp', header(COMMAND_ID.enquire_link_resp, 0x7fffffff)],
    ['unbind', lib('unbind', {}, 3)],
    ['unbind_resp', header(COMMAND_ID.unbind_resp, 4)],
    ['generic_nack with status', lib('generic_nack', { command_status: 0x03 }, 5)],
    ['deliver_sm', lib('deliver_sm', { source_addr: '1', destination_addr: '2', data_coding: 0, short_message: Buffer.from('x') }, 6)],
    ['alert_notification', lib('alert_notification', { source_addr: '1', esme_addr: '2' }, 7)],
    ['outbind', lib('outbind', { system_id: 'smsc', password: 'pw' }, 8)],
    ['unknown command', header(0x00000222, 9, 0, Buffer.from([1, 2, 3]))],
    ['status with the high bit set', header(COMMAND_ID.submit_sm_resp, 10, 0x80000001)],
  ];
  for (const [what, raw] of buffers) {
    it(what, () => {
      const l = libDecode(raw);
      assert.deepEqual(decodeHeader(raw), {
        commandLength: l.command_length,
        commandId: l.command_id,
        commandStatus: l.command_status,
        sequenceNumber: l.sequence_number,
      });
    });
  }

  it('refuses a buffer shorter than a header or than its command_length', () => {
    assert.throws(() => decodeHeader(Buffer.alloc(15)), SmppPduFormatError);
    const raw = header(COMMAND_ID.enquire_link, 1);
    raw.writeUInt32BE(17, 0);
    assert.throws(() => decodeHeader(raw), SmppPduFormatError);
    raw.writeUInt32BE(15, 0);
    assert.throws(() => decodeHeader(raw), SmppPduFormatError);
  });
});

describe('decodeSubmitSmResp', () => {
  const buffers: Array<[string, Buffer]> = [
    ['accepted', lib('submit_sm_resp', { message_id: '0000001A' }, 1)],
    ['accepted, long id', lib('submit_sm_resp', { message_id: 'a1b2c3d4-e5f6-7890-abcd-ef0123456789'.slice(0, 64) }, 2)],
    ['accepted, empty id', lib('submit_sm_resp', { message_id: '' }, 3)],
    ['throttled, empty body', header(COMMAND_ID.submit_sm_resp, 4, 0x58)],
    ['system error, empty body', header(COMMAND_ID.submit_sm_resp, 5, 0x08)],
    ['refused, with an id all the same', header(COMMAND_ID.submit_sm_resp, 6, 0x0b, Buffer.from('42\0'))],
    ['accepted, empty body', header(COMMAND_ID.submit_sm_resp, 7)],
    ['id without its NUL', header(COMMAND_ID.submit_sm_resp, 8, 0, Buffer.from('abc'))],
    ['id octets above 0x7F', header(COMMAND_ID.submit_sm_resp, 9, 0, Buffer.from([0x41, 0xc1, 0xff, 0x30, 0]))],
    ['id followed by a TLV', header(COMMAND_ID.submit_sm_resp, 10, 0, Buffer.from([0x39, 0x39, 0, 0x04, 0x25, 0, 1, 7]))],
    ['generic_nack in its place', lib('generic_nack', { command_status: 0x03 }, 11)],
    ['generic_nack with a body', header(COMMAND_ID.generic_nack, 12, 0x03, Buffer.from('x\0'))],
  ];
  for (const [what, raw] of buffers) {
    it(what, () => {
      const l = libDecode(raw);
      const ours = decodeSubmitSmResp(raw);
      assert.deepEqual(
        { id: ours.commandId, status: ours.commandStatus, seq: ours.sequenceNumber, length: ours.commandLength, messageId: ours.messageId },
        { id: l.command_id, status: l.command_status, seq: l.sequence_number, length: l.command_length, messageId: l.message_id },
      );
    });
  }
});

describe('decodeBindResp', () => {
  const commands = ['bind_transceiver_resp', 'bind_transmitter_resp', 'bind_receiver_resp'];
  for (const command of commands) {
    const buffers: Array<[string, Buffer]> = [
      ['system_id', lib(command, { system_id: 'SMSC' }, 1)],
      ['system_id and sc_interface_version TLV', lib(command, { system_id: 'SMSC-1', sc_interface_version: 0x34 }, 2)],
      ['empty system_id and the TLV', lib(command, { system_id: '', sc_interface_version: 0x50 }, 3)],
      ['rejected, empty body', header(COMMAND_ID[command as 'bind_transceiver_resp'], 4, 0x0e)],
      ['rejected with a system_id', lib(command, { system_id: 'SMSC' }, 5).fill(0, 8, 11).fill(0x0d, 11, 12)],
    ];
    for (const [what, raw] of buffers) {
      it(`${command}: ${what}`, () => {
        const l = libDecode(raw);
        const ours = decodeBindResp(raw);
        assert.deepEqual(
          { id: ours.commandId, status: ours.commandStatus, seq: ours.sequenceNumber, systemId: ours.systemId },
          { id: l.command_id, status: l.command_status, seq: l.sequence_number, systemId: l.system_id },
        );
      });
    }
  }

  it('a generic_nack answering a bind has no system_id, like the library reads it', () => {
    const raw = lib('generic_nack', { command_status: 0x03 }, 6);
    assert.equal(decodeBindResp(raw).systemId, libDecode(raw).system_id);
  });
});

describe('parseSmPdu on deliver_sm, against the library', () => {
  const receiptText = 'id:0000001A sub:001 dlvrd:001 submit date:2311221530 done date:2311221531 stat:DELIVRD err:000 text:Hello';
  const buffers: Array<[string, Buffer]> = [
    ['receipt with text and TLVs', lib('deliver_sm', {
      source_addr_ton: 1,
      source_addr_npi: 1,
      source_addr: '447700900000',
      dest_addr_ton: 5,
      destination_addr: 'Acme',
      esm_class: 0x04,
      data_coding: 0,
      short_message: Buffer.from(receiptText, 'ascii'),
      receipted_message_id: '0000001A',
      message_state: 2,
    }, 1)],
    ['TLV-only receipt', lib('deliver_sm', { source_addr: '1', destination_addr: '2', esm_class: 0x04, data_coding: 0, short_message: Buffer.alloc(0), receipted_message_id: 'abc', message_state: 5 }, 2)],
    ['MO, GSM-7', lib('deliver_sm', { service_type: 'CMT', source_addr: '447700900001', destination_addr: '12345', data_coding: 0, protocol_id: 0, priority_flag: 1, registered_delivery: 0, short_message: encodeGsm7Unpacked('Hi there, 100% sure?') }, 3)],
    ['MO, UCS-2 with a concatenation UDH', lib('deliver_sm', {
      source_addr: '447700900002',
      destination_addr: '12345',
      esm_class: 0x40,
      data_coding: 8,
      short_message: { udh: Buffer.from([0x05, 0x00, 0x03, 0x2a, 0x02, 0x01]), message: encodeUcs2('Příliš žluťoučký') },
    }, 4)],
    ['MO, 16-bit reference UDH', lib('deliver_sm', {
      source_addr: '447700900003',
      destination_addr: '12345',
      esm_class: 0x40,
      data_coding: 0,
      short_message: { udh: Buffer.from([0x06, 0x08, 0x04, 0x12, 0x34, 0x03, 0x02]), message: encodeGsm7Unpacked('second') },
    }, 5)],
    ['MO in message_payload with SAR TLVs', lib('deliver_sm', {
      source_addr: '447700900004',
      destination_addr: '12345',
      data_coding: 8,
      short_message: Buffer.alloc(0),
      message_payload: encodeUcs2('Ж'.repeat(200)),
      sar_msg_ref_num: 0x0102,
      sar_total_segments: 2,
      sar_segment_seqnum: 1,
    }, 6)],
    ['Latin-1 data_coding 3', lib('deliver_sm', { source_addr: '1', destination_addr: '2', data_coding: 3, short_message: Buffer.from('café', 'latin1') }, 7)],
  ];
  for (const [what, raw] of buffers) {
    it(what, () => {
      const l = libDecode(raw);
      const ours = parseSmPdu(raw);
      const mandatory = [
        'service_type', 'source_addr_ton', 'source_addr_npi', 'source_addr', 'dest_addr_ton', 'dest_addr_npi', 'destination_addr',
        'esm_class', 'protocol_id', 'priority_flag', 'schedule_delivery_time', 'validity_period', 'registered_delivery',
        'replace_if_present_flag', 'data_coding', 'sm_default_msg_id',
      ] as const;
      for (const name of mandatory) assert.equal(ours[name], l[name], name);
      assert.equal(ours.commandId, l.command_id);
      assert.equal(ours.commandStatus, l.command_status);
      assert.equal(ours.sequenceNumber, l.sequence_number);
      assert.equal(ours.receipted_message_id, l.receipted_message_id);
      assert.equal(ours.message_state, l.message_state);
      assert.equal(ours.sar_msg_ref_num, l.sar_msg_ref_num);
      assert.equal(ours.sar_total_segments, l.sar_total_segments);
      assert.equal(ours.sar_segment_seqnum, l.sar_segment_seqnum);
      // The library decodes the user data to text (and the UDH to its elements); we keep octets.
      const libText = (l.message_payload ?? l.short_message) as { udh?: Buffer[]; message: string };
      assert.equal(decodeUserData(ours.data_coding, ours.body), libText.message);
      const elements = ours.udh?.elements.map((e) => Buffer.concat([Buffer.from([e.iei, e.data.length]), e.data]));
      assert.deepEqual(elements, l.short_message && (l.short_message as { udh?: Buffer[] }).udh);
    });
  }
});

describe('parseSmPdu on data_sm, against the library', () => {
  const receiptText = 'id:26 sub:001 dlvrd:000 submit date:2311221530 done date:2311221531 stat:UNDELIV err:001 text:Hello';
  const buffers: Array<[string, Buffer]> = [
    ['receipt with its text in message_payload and TLVs', lib('data_sm', {
      service_type: 'CMT', source_addr_ton: 1, source_addr_npi: 1, source_addr: '447700900000', dest_addr_ton: 5, destination_addr: 'Acme',
      esm_class: 0x04, registered_delivery: 0, data_coding: 0, message_payload: Buffer.from(receiptText, 'ascii'), receipted_message_id: '26', message_state: 5,
    }, 11)],
    ['TLV-only receipt', lib('data_sm', { source_addr: '1', destination_addr: '2', esm_class: 0x04, data_coding: 0, receipted_message_id: 'abc', message_state: 2 }, 12)],
    ['MO, UCS-2', lib('data_sm', { source_addr: '447700900001', destination_addr: '12345', data_coding: 8, message_payload: encodeUcs2('Příliš žluťoučký kůň') }, 13)],
  ];
  for (const [what, raw] of buffers) {
    it(what, () => {
      const l = libDecode(raw);
      const ours = parseSmPdu(raw);
      for (const name of ['service_type', 'source_addr_ton', 'source_addr_npi', 'source_addr', 'dest_addr_ton', 'dest_addr_npi', 'destination_addr',
        'esm_class', 'registered_delivery', 'data_coding'] as const) {
        assert.equal(ours[name], l[name], name);
      }
      assert.equal(ours.commandId, COMMAND_ID.data_sm);
      assert.equal(ours.sequenceNumber, l.sequence_number);
      assert.equal(ours.receipted_message_id, l.receipted_message_id);
      assert.equal(ours.message_state, l.message_state);
      // What data_sm does not have reads as empty.
      assert.deepEqual([ours.protocol_id, ours.priority_flag, ours.schedule_delivery_time, ours.validity_period, ours.short_message.length], [0, 0, '', '', 0]);
      const libText = l.message_payload as { message: string } | undefined;
      assert.equal(decodeUserData(ours.data_coding, ours.body), libText?.message ?? '');
    });
  }
  it('a receipt read from data_sm is the receipt read from deliver_sm', () => {
    const fields = { source_addr: '447700900000', destination_addr: 'Acme', esm_class: 0x04, data_coding: 0 };
    const text = Buffer.from(receiptText, 'ascii');
    const fromData = parseReceipt(parseSmPdu(lib('data_sm', { ...fields, message_payload: text }, 1)));
    const fromDeliver = parseReceipt(parseSmPdu(lib('deliver_sm', { ...fields, short_message: text }, 1)));
    assert.deepEqual(fromData, fromDeliver);
    assert.equal(fromData?.state, 'undelivered');
    assert.equal(fromData?.messageId, '26');
  });
});

// -------------------------------------------------------------------------------------------------
// Framing
// -------------------------------------------------------------------------------------------------

function drain(framer: PduFramer, out: Buffer[]): void {
  for (let pdu = framer.next(); pdu !== null; pdu = framer.next()) out.push(Buffer.from(pdu));
}

describe('PduFramer', () => {
  const pdus = [
    lib('bind_transceiver_resp', { system_id: 'SMSC', sc_interface_version: 0x34 }, 1),
    lib('submit_sm_resp', { message_id: '0000001A' }, 2),
    header(COMMAND_ID.submit_sm_resp, 3, 0x58),
    lib('deliver_sm', { source_addr: '1', destination_addr: '2', esm_class: 4, data_coding: 0, short_message: Buffer.from('id:1 stat:DELIVRD'), receipted_message_id: '1' }, 4),
    lib('enquire_link', {}, 5),
    lib('generic_nack', { command_status: 3 }, 6),
    lib('deliver_sm', { source_addr: '1', destination_addr: '2', data_coding: 8, short_message: Buffer.alloc(0), message_payload: Buffer.alloc(1000, 0x41) }, 7),
  ];
  const stream = Buffer.concat(pdus);

  it('yields the same PDUs in order, cut at every byte position', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const framer = new PduFramer();
      const out: Buffer[] = [];
      framer.push(stream.subarray(0, cut));
      drain(framer, out);
      framer.push(stream.subarray(cut));
      drain(framer, out);
      assert.deepEqual(out, pdus, `cut at ${cut}`);
    }
  });

  it('yields the same PDUs cut at every pair of positions, chunks pushed before draining', () => {
    for (let a = 0; a <= stream.length; a += 7) {
      for (let b = a; b <= stream.length; b += 11) {
        const framer = new PduFramer();
        const out: Buffer[] = [];
        framer.push(stream.subarray(0, a));
        framer.push(stream.subarray(a, b));
        drain(framer, out);
        framer.push(stream.subarray(b));
        drain(framer, out);
        assert.deepEqual(out, pdus, `cuts at ${a} and ${b}`);
      }
    }
  });

  it('yields the same PDUs fed one octet at a time', () => {
    const framer = new PduFramer();
    const out: Buffer[] = [];
    for (let i = 0; i < stream.length; i++) {
      framer.push(stream.subarray(i, i + 1));
      drain(framer, out);
    }
    assert.deepEqual(out, pdus);
    assert.equal(framer.next(), null);
  });

  it('hands out views of the chunk, not copies, when a PDU lies inside one', () => {
    const framer = new PduFramer();
    framer.push(stream);
    const first = framer.next();
    assert.ok(first);
    assert.equal(first.buffer, stream.buffer);
  });

  const bad: Array<[string, number]> = [
    ['0', 0],
    ['4', 4],
    ['15 (shorter than a header)', 15],
    [`${MAX_PDU_LENGTH + 1} (over the limit)`, MAX_PDU_LENGTH + 1],
    ['0xFFFFFFFF', 0xffffffff],
  ];
  for (const [what, length] of bad) {
    it(`reports command_length ${what}, after the PDUs before it`, () => {
      const corrupt = Buffer.alloc(20);
      corrupt.writeUInt32BE(length, 0);
      const framer = new PduFramer();
      framer.push(Buffer.concat([pdus[1] as Buffer, corrupt.subarray(0, 2)]));
      assert.deepEqual(framer.next(), pdus[1]);
      assert.equal(framer.next(), null, 'two octets of a length are not enough to judge it');
      framer.push(corrupt.subarray(2));
      assert.throws(() => framer.next(), SmppPduFormatError);
    });
  }

  it('waits for the rest of a PDU at the length limits instead of refusing it', () => {
    for (const length of [16, MAX_PDU_LENGTH]) {
      const framer = new PduFramer();
      const start = Buffer.alloc(8);
      start.writeUInt32BE(length, 0);
      framer.push(start);
      assert.equal(framer.next(), null);
    }
  });
});

// -------------------------------------------------------------------------------------------------
// The session over a raw socket
// -------------------------------------------------------------------------------------------------

describe('SmppSession framing and answers', () => {
  /** A bare SMSC: answers the bind, then lets the test write raw bytes and read what comes back. */
  async function rawSmsc(): Promise<{ port: number; connected: Promise<net.Socket>; received: PduFramer; close(): Promise<void> }> {
    const received = new PduFramer();
    let accept: (s: net.Socket) => void = () => {};
    const connected = new Promise<net.Socket>((resolve) => (accept = resolve));
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.once('data', (chunk: Buffer) => {
        const bind = decodeHeader(chunk);
        assert.equal(bind.commandId, COMMAND_ID.bind_transceiver);
        const resp = lib('bind_transceiver_resp', { system_id: 'RAW' }, bind.sequenceNumber);
        // One octet per write: the session has to put the response back together.
        for (const octet of resp) socket.write(Buffer.from([octet]));
        socket.on('data', (more: Buffer) => received.push(more));
        accept(socket);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as net.AddressInfo).port;
    return {
      port,
      connected,
      received,
      close: async () => {
        for (const s of sockets) s.destroy();
        server.close();
        await once(server, 'close');
      },
    };
  }

  async function collect(framer: PduFramer, count: number): Promise<Buffer[]> {
    const out: Buffer[] = [];
    const deadline = Date.now() + 3_000;
    while (out.length < count) {
      if (Date.now() > deadline) throw new Error(`got ${out.length} of ${count} PDUs`);
      drain(framer, out);
      await new Promise((r) => setTimeout(r, 5));
    }
    return out;
  }

  /** A session bound to a fresh bare SMSC; `close` ends both. */
  async function boundSession(): Promise<{ smsc: Awaited<ReturnType<typeof rawSmsc>>; session: SmppSession; socket: net.Socket; systemId: string; close(): Promise<void> }> {
    const smsc = await rawSmsc();
    const session = new SmppSession({ host: '127.0.0.1', port: smsc.port, systemId: 'sb', password: 'pw', reconnect: false, unbindTimeoutMs: 200 });
    const bound = once(session, 'bound');
    session.start();
    const socket = await smsc.connected;
    const [info] = (await bound) as [{ systemId: string }];
    return { smsc, session, socket, systemId: info.systemId, close: async () => { await session.close(); await smsc.close(); } };
  }

  it('answers several requests written in one chunk, each in kind', { timeout: 10_000 }, async () => {
    const { smsc, session, socket, systemId, close } = await boundSession();
    try {
      assert.equal(systemId, 'RAW');
      socket.write(
        Buffer.concat([
          lib('enquire_link', {}, 101),
          header(0x00000222, 102),
          lib('data_sm', { source_addr: '1', destination_addr: '2', data_coding: 0 }, 103),
          lib('alert_notification', { source_addr: '1', esme_addr: '2' }, 104),
          lib('deliver_sm', { source_addr: '1', destination_addr: '2', data_coding: 0, short_message: Buffer.from('hi') }, 105),
        ]),
      );
      const answers = await collect(smsc.received, 4);
      assert.deepEqual(answers, [
        encodeHeaderPdu(COMMAND_ID.enquire_link_resp, 101),
        encodeHeaderPdu(COMMAND_ID.generic_nack, 102, 0x03),
        // data_sm is read as deliver_sm is (some SMSCs deliver receipts and MO with it), and
        // answered with its own response: no deliver handler here, so a temporary error.
        encodeHeaderPdu(COMMAND_ID.data_sm_resp, 103, 0x64),
        encodeDeliverSmResp(105, 0x64), // no deliver handler: temporary error
      ]);
      assert.equal(session.stats.enquireLinksAnswered, 1);
      assert.equal(session.stats.deliversReceived, 2);
    } finally {
      await close();
    }
  });

  it('a generic_nack with status 0 is a failure; a response of another command with the same number is not the answer', { timeout: 10_000 }, async () => {
    const { smsc, session, socket, close } = await boundSession();
    try {
      const first = session.submit(sms('one'));
      const second = session.submit(sms('two'));
      const [a, b] = await collect(smsc.received, 2);
      const seqA = decodeHeader(a!).sequenceNumber;
      const seqB = decodeHeader(b!).sequenceNumber;
      socket.write(Buffer.concat([
        encodeHeaderPdu(COMMAND_ID.generic_nack, seqA, 0),
        encodeHeaderPdu(COMMAND_ID.enquire_link_resp, seqB),
        lib('submit_sm_resp', { message_id: 'M2' }, seqB),
      ]));
      const nacked = await first;
      assert.equal(nacked.commandStatus, 0x08, 'reported as ESME_RSYSERR');
      assert.equal(nacked.messageId, undefined);
      const answered = await second;
      assert.equal(answered.commandStatus, 0);
      assert.equal(answered.messageId, 'M2');
    } finally {
      await close();
    }
  });

  it('drops the connection on a command_length out of range', { timeout: 10_000 }, async () => {
    const { session, socket, close } = await boundSession();
    try {
      const disconnected = once(session, 'disconnected');
      socket.write(Buffer.concat([lib('enquire_link', {}, 7), header(COMMAND_ID.enquire_link, 8).fill(0, 0, 4)]));
      const [info] = (await disconnected) as [{ reason: string; wasBound: boolean }];
      assert.match(info.reason, /^protocol error: command_length 0 /);
      assert.equal(info.wasBound, true);
      // The PDU before the corrupt length was handled (its answer dies with the socket).
      assert.equal(session.stats.enquireLinksAnswered, 1);
    } finally {
      await close();
    }
  });
});
