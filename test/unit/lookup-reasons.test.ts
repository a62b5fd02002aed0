import { test } from 'node:test';
import assert from 'node:assert/strict';
import { endReason, type EndReason } from '../../shared/lookup/reasons.js';
import type { AttemptState } from '../../shared/channels/index.js';
import { parseIdRef, singleRecipientId } from '../../shared/sending/ids.js';

test('why an attempt ended without success, from its state and result_info', () => {
  const table: Array<[AttemptState, string, EndReason | null]> = [
    ['undelivered', '[1] TTL expired', 'ttl_expired'],
    ['undelivered', '[1] Not a Viber user', 'not_a_user'],
    ['undelivered', '[1] Not a WhatsApp user', 'not_a_user'],
    ['undelivered', '[9] SRVC_NOT_VIBER_USER', 'not_a_user'],
    ['undelivered', '[10] SRVC_NO_SUITABLE_DEVICE', 'not_a_user'],
    ['undelivered', '[131047] Re-engagement message', 'outside_whatsapp_window'],
    ['undelivered', '[1] Outside the 24-hour window', 'outside_whatsapp_window'],
    ['rejected', '[307] Insufficient credit', 'insufficient_credit'],
    ['rejected', '[304] Recipient opted out', 'opted_out'],
    ['rejected', '[303] No route', 'no_route'],
    ['rejected', '[303] No route: sender "Shop" is not registered for viber', 'no_route'],
    ['rejected', '[302] Invalid phone number', 'invalid_number'],
    ['undelivered', '[1] Undelivered', 'undelivered'],
    ['rejected', '[2] Rejected by carrier', 'rejected'],
    ['failed', '[3] Failed', 'failed'],
    ['failed', '', 'failed'],
    ['sent', 'Sent', null],
    ['delivered', '[0] Delivered', null],
    ['seen', '[0] Seen', null],
    ['sending', 'Sending', null],
  ];
  for (const [state, info, reason] of table) {
    assert.equal(endReason(state, info), reason, `${state} ${info}`);
  }
});

test('ids given to a lookup: a message id, a batch recipient (<id>-<index>), a single call\'s recipient', () => {
  const id = '0123456789abcdef0123';
  assert.deepEqual(parseIdRef(id), { kind: 'plain', id, prefix: '0123456789abcdef01' });
  assert.deepEqual(parseIdRef(`${id}-0`), { kind: 'indexed', messageId: id, index: 0 });
  assert.deepEqual(parseIdRef(`${id}-12`), { kind: 'indexed', messageId: id, index: 12 });
  for (const bad of ['', 'xyz', `${id}-`, `${id}-01`, `${id}-a`, id.toUpperCase(), `${id}0`, id.slice(1), `${id}-99999`, ` ${id}`]) {
    assert.equal(parseIdRef(bad), null, JSON.stringify(bad));
  }
  assert.equal(singleRecipientId(id, 0), '0123456789abcdef0100');
  assert.equal(singleRecipientId(id, 9), '0123456789abcdef0109');
  assert.equal(singleRecipientId(id, 255), '0123456789abcdef01ff');
  assert.throws(() => singleRecipientId(id, 256));
  const recipient = parseIdRef(singleRecipientId(id, 3));
  assert.ok(recipient?.kind === 'plain' && recipient.prefix === id.slice(0, 18), 'a single call\'s recipient id leads to its message\'s id prefix');
});
