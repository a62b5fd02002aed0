/**
 * The SMSC simulator's behaviours the fault suite relies on, driven by the `smpp` library as an
 * independent client: binds refused while the "SMSC" is down, and receipts sent again until the
 * client acknowledges them (as SMSCs do), so a receipt cut off with its connection is not lost,
 * and none written into a bind that is ending (unbind sent or received), where it would be lost.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import smpp from 'smpp';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';

function connect(port: number): Promise<smpp.Session> {
  return new Promise((resolve, reject) => {
    const session = smpp.connect({ host: '127.0.0.1', port }, () => resolve(session));
    session.once('error', reject);
  });
}

function bind(session: smpp.Session): Promise<number> {
  return new Promise((resolve) => {
    session.bind_transceiver({ system_id: 'faults', password: 'faults' }, (pdu) => resolve(pdu.command_status as number));
  });
}

describe('SMSC simulator: link faults', () => {
  let sim: SmscSimulator;
  const sessions: smpp.Session[] = [];

  before(async () => {
    sim = new SmscSimulator({ idForm: 'decimal', receiptDelayMs: 10, redeliverMs: 100 });
    await sim.start();
  });
  after(async () => {
    for (const s of sessions) s.destroy();
    await sim.stop();
  });

  it('refuses binds with ESME_RBINDFAIL while refuseBinds is set, and accepts them again after', async () => {
    sim.setMode({ refuseBinds: true });
    const first = await connect(sim.port);
    sessions.push(first);
    assert.equal(await bind(first), 0x0d);
    assert.equal(sim.counters.bindsRejected, 1);
    sim.setMode({ refuseBinds: false });
    const second = await connect(sim.port);
    sessions.push(second);
    assert.equal(await bind(second), 0);
    // Gone before the next test, whose receipts would otherwise be sent here too.
    first.destroy();
    second.destroy();
    await sim.waitFor(() => sim.openSessions === 0, 2000, 'the sessions to close');
  });

  it('sends a receipt again after redeliverMs until it is acknowledged', async () => {
    const session = await connect(sim.port);
    sessions.push(session);
    assert.equal(await bind(session), 0);
    const seen: string[] = [];
    const acknowledged = new Promise<void>((resolve) => {
      session.on('deliver_sm', (pdu: smpp.PDU) => {
        seen.push(String(pdu.receipted_message_id));
        // The first copy is refused (as a service that could not store it would), the second acknowledged.
        session.send(pdu.response({ command_status: seen.length === 1 ? 0x08 : 0 }));
        if (seen.length === 2) resolve();
      });
    });
    const id = await new Promise<string>((resolve) => {
      session.submit_sm({ destination_addr: '420777000010', short_message: 'hi', registered_delivery: 1 }, (pdu) => resolve(String(pdu.message_id)));
    });
    await acknowledged;
    assert.deepEqual(seen, [id, id]);
    await sim.waitFor(() => sim.counters.receiptsAcked === 1, 2000, 'the acknowledgement');
    assert.equal(sim.counters.receiptsNacked, 1);
  });

  it('sends no receipt over a bind that is unbinding: the receipt waits for the next bind', async () => {
    const own = new SmscSimulator({ idForm: 'decimal', receiptDelayMs: 300 });
    await own.start();
    const mine: smpp.Session[] = [];
    try {
      const first = await connect(own.port);
      mine.push(first);
      assert.equal(await bind(first), 0);
      const overFirst: string[] = [];
      first.on('deliver_sm', (pdu: smpp.PDU) => {
        overFirst.push(String(pdu.receipted_message_id));
        first.send(pdu.response());
      });
      const id = await new Promise<string>((resolve) => {
        first.submit_sm({ destination_addr: '420777000011', short_message: 'hi', registered_delivery: 1 }, (pdu) => resolve(String(pdu.message_id)));
      });
      // The SMSC unbinds; this client does not answer, so the bind stays ending past the receipt's time.
      const unbinding = own.unbindAll(1_000);
      await sleep(600);
      assert.deepEqual(overFirst, [], 'nothing delivered over the ending bind');
      const second = await connect(own.port);
      mine.push(second);
      const overSecond = new Promise<string>((resolve) => {
        second.on('deliver_sm', (pdu: smpp.PDU) => {
          second.send(pdu.response());
          resolve(String(pdu.receipted_message_id));
        });
      });
      assert.equal(await bind(second), 0);
      assert.equal(await overSecond, id, 'the receipt went out over the next bind');
      await unbinding;
      assert.deepEqual(overFirst, []);
      assert.equal(own.counters.receiptsNacked, 0);
    } finally {
      for (const s of mine) s.destroy();
      await own.stop();
    }
  });
});
