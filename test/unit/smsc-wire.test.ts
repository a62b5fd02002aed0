/**
 * The SMSC simulator's own wire encoding (scripts/smsc-wire.ts), read back by the `smpp` library
 * (an implementation independent of both the simulator and the service's codec) and compared
 * with the library's own bytes for the same fields; and the delay line that times its receipts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import smpp from 'smpp';
import { COMMAND_ID, concatUdh } from '../../shared/carriers/smpp/pdu.js';
import { DelayLine, decodeBindRequest, encodeBare, encodeCStringResponse, encodeDataSm, encodeDeliverSm, type DeliverSmFields } from '../../scripts/smsc-wire.js';

function libDecode(raw: Buffer): smpp.PDU {
  const pdu = smpp.PDU.fromBuffer(raw);
  assert.ok(pdu, 'the library decodes it');
  return pdu;
}

function lib(command: string, fields: smpp.PduFields, sequence: number): Buffer {
  const pdu = new smpp.PDU(command, fields);
  pdu.sequence_number = sequence;
  return pdu.toBuffer();
}

describe('simulator wire encoding', () => {
  const receipt: DeliverSmFields = {
    source_addr_ton: 1, source_addr_npi: 1, source_addr: '420777123400',
    dest_addr_ton: 5, dest_addr_npi: 0, destination_addr: 'Shop',
    esm_class: 0x04, data_coding: 0,
    short_message: Buffer.from('id:0000001A sub:001 dlvrd:001 submit date:2611250000 done date:2611250000 stat:DELIVRD err:000 text:Hi', 'latin1'),
    receipted_message_id: '0000001A', message_state: 2,
  };
  const mo: DeliverSmFields = {
    source_addr_ton: 1, source_addr_npi: 1, source_addr: '420777123400',
    dest_addr_ton: 1, dest_addr_npi: 1, destination_addr: '420600000000',
    esm_class: 0x40, data_coding: 8,
    short_message: Buffer.concat([concatUdh(7, 2, 1), Buffer.from('0061006200e1', 'hex')]),
  };

  for (const [name, fields] of [['receipt with TLVs', receipt], ['MO part with a UDH', mo]] as const) {
    it(`deliver_sm (${name}) is the library's bytes and reads back field by field`, () => {
      const ours = encodeDeliverSm(fields, 4242);
      const { receipted_message_id, message_state, short_message, ...mandatory } = fields;
      const expected = lib('deliver_sm', {
        ...mandatory,
        short_message,
        ...(receipted_message_id !== undefined && { receipted_message_id }),
        ...(message_state !== undefined && { message_state }),
      }, 4242);
      assert.deepEqual(ours, expected);
      const decoded = libDecode(ours);
      assert.equal(decoded.command, 'deliver_sm');
      assert.equal(decoded.sequence_number, 4242);
      assert.equal(decoded.source_addr, fields.source_addr);
      assert.equal(decoded.destination_addr, fields.destination_addr);
      assert.equal(decoded.esm_class, fields.esm_class);
      assert.equal(decoded.receipted_message_id, receipted_message_id);
      assert.equal(decoded.message_state, message_state);
    });
  }

  for (const [name, fields] of [['receipt with TLVs', receipt], ['MO part with a UDH', mo]] as const) {
    it(`data_sm (${name}) is the library's bytes, the text in message_payload`, () => {
      const ours = encodeDataSm(fields, 4243);
      const { receipted_message_id, message_state, short_message, source_addr_ton, source_addr_npi, source_addr, dest_addr_ton, dest_addr_npi,
        destination_addr, esm_class, data_coding } = fields;
      // The library writes data_sm's TLVs in the order it knows them: receipted_message_id and
      // message_state before message_payload. Ours writes the payload first; both are valid TLV
      // orders, so the comparison is field by field, and the byte length.
      const expected = lib('data_sm', {
        source_addr_ton, source_addr_npi, source_addr, dest_addr_ton, dest_addr_npi, destination_addr, esm_class, data_coding,
        message_payload: short_message,
        ...(receipted_message_id !== undefined && { receipted_message_id }),
        ...(message_state !== undefined && { message_state }),
      }, 4243);
      assert.equal(ours.length, expected.length);
      const decoded = libDecode(ours);
      const theirs = libDecode(expected);
      assert.equal(decoded.command, 'data_sm');
      assert.equal(decoded.sequence_number, 4243);
      for (const field of ['service_type', 'source_addr_ton', 'source_addr_npi', 'source_addr', 'dest_addr_ton', 'dest_addr_npi', 'destination_addr',
        'esm_class', 'registered_delivery', 'data_coding', 'receipted_message_id', 'message_state'] as const) {
        assert.deepEqual(decoded[field], theirs[field], field);
      }
      assert.deepEqual(decoded.message_payload, theirs.message_payload);
    });
  }

  it('submit_sm_resp and bind_transceiver_resp carry their C-string; an error status leaves the body out', () => {
    const resp = libDecode(encodeCStringResponse(COMMAND_ID.submit_sm_resp, 7, 0, '0000001A'));
    assert.equal(resp.command, 'submit_sm_resp');
    assert.equal(resp.sequence_number, 7);
    assert.equal(resp.message_id, '0000001A');
    const bind = libDecode(encodeCStringResponse(COMMAND_ID.bind_transceiver_resp, 1, 0, 'SMSCSIM'));
    assert.equal(bind.command, 'bind_transceiver_resp');
    assert.equal(bind.system_id, 'SMSCSIM');
    const refused = encodeCStringResponse(COMMAND_ID.submit_sm_resp, 8, 0x58, 'ignored');
    assert.equal(refused.length, 16);
    assert.equal(libDecode(refused).command_status, 0x58);
  });

  it('bare PDUs are a header of 16 octets', () => {
    const pdu = libDecode(encodeBare(COMMAND_ID.enquire_link, 99));
    assert.equal(pdu.command, 'enquire_link');
    assert.equal(pdu.sequence_number, 99);
    assert.equal(libDecode(encodeBare(COMMAND_ID.generic_nack, 3, 0x03)).command_status, 0x03);
  });

  it('a bind request gives up its system_id and password, also when the body is cut short', () => {
    const raw = lib('bind_transceiver', { system_id: 'bench', password: 'secret', system_type: '', interface_version: 0x34 }, 1);
    assert.deepEqual(decodeBindRequest(raw), { systemId: 'bench', password: 'secret' });
    const cut = Buffer.from(raw.subarray(0, 16 + 6));
    cut.writeUInt32BE(cut.length, 0);
    assert.deepEqual(decodeBindRequest(cut), { systemId: 'bench', password: '' });
  });
});

describe('DelayLine', () => {
  it('runs every callback once, in the order added, no earlier than its delay', async () => {
    const line = new DelayLine(30);
    const ran: Array<{ n: number; late: number }> = [];
    const start = Date.now();
    for (let n = 0; n < 5; n++) {
      const added = Date.now();
      line.add(() => ran.push({ n, late: Date.now() - added }));
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 80));
    assert.deepEqual(ran.map((r) => r.n), [0, 1, 2, 3, 4]);
    for (const r of ran) assert.ok(r.late >= 29, `callback ${r.n} ran after ${r.late} ms`);
    assert.ok(Date.now() - start < 1000);
  });

  it('clear drops what is waiting', async () => {
    const line = new DelayLine(10);
    let ran = 0;
    line.add(() => ran++);
    line.clear();
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(ran, 0);
  });
});
