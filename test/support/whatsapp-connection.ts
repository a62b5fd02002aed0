/**
 * A WhatsApp connection against the Graph simulator, as tests of several worker processes set it
 * up: an account priced for templates, the connection `main` with a per-number cap, and one
 * business number registered for the account.
 */
import assert from 'node:assert/strict';
import type { WhatsappSimulator } from '../../scripts/sim/whatsapp/simulator.js';
import { statesKey } from '../../shared/carriers/connections.js';
import type { TestService } from './harness.js';

/** Creates the account, the connection `main` (`per_number_mps`) and the sender row of `phoneNumberId`. */
export async function whatsappConnection(
  svc: TestService, sim: WhatsappSimulator, perNumberMps: number, phoneNumberId: string,
): Promise<{ accountId: number; apiKey: string }> {
  const account = await svc.createAccount({ credit_czk: 1000 });
  await svc.admin('PUT', '/prices', [{ channel: 'whatsapp_template', prefix: '', price_czk: 1, price_eur: 0.04 }]);
  const conn = await svc.admin('POST', '/carriers', {
    name: 'main', kind: 'whatsapp', config: { app_secret: sim.seed.app.secret, verify_token: sim.seed.app.verify_token, per_number_mps: perNumberMps },
  });
  assert.equal(conn.status, 201, conn.text);
  const sender = await svc.admin('POST', '/senders', {
    account_id: account.accountId, family: 'whatsapp', sender: phoneNumberId, connection: 'main',
    credentials: { access_token: 'sim-system-user-token' }, details: {},
  });
  assert.equal(sender.status, 201, sender.text);
  return account;
}

/** How many processes run the connection `main` now (each publishes its state in Redis). */
export async function processesRunningMain(svc: TestService): Promise<number> {
  const states = await svc.runtime.redis.hkeys(statesKey(svc.prefix));
  return states.filter((f) => f.startsWith('main\u0000')).length;
}
