import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planTransition, planReceiptTransition, isRefunded, isLateSent, keepsEarlierReceipt, ttlExpiryApplies, defaultTtlMinutes, stepTtlMinutes, startsNextStep } from '../../shared/engine/transitions.js';
import { isStepSuccess, type FlowStep } from '../../shared/channels/index.js';
import { sandboxScript } from '../../shared/carriers/sandbox/outcomes.js';
import type { AttemptState } from '../../shared/carriers/types.js';

test('planTransition follows D3 and fills in states a receipt skipped', () => {
  const table: Array<[AttemptState, AttemptState, AttemptState[] | null]> = [
    ['sending', 'sent', ['sent']],
    ['sending', 'failed', ['failed']],
    ['sending', 'rejected', ['rejected']],
    ['sending', 'undelivered', ['undelivered']],
    ['sending', 'delivered', ['sent', 'delivered']],
    ['sending', 'seen', ['sent', 'delivered', 'seen']],
    ['sent', 'delivered', ['delivered']],
    ['sent', 'undelivered', ['undelivered']],
    ['sent', 'failed', ['failed']],
    ['sent', 'rejected', ['rejected']],
    ['sent', 'seen', ['delivered', 'seen']],
    ['delivered', 'seen', ['seen']],
    ['sent', 'sent', null],
    ['sent', 'sending', null],
    ['delivered', 'undelivered', null],
    ['delivered', 'failed', null],
    ['seen', 'delivered', null],
    ['undelivered', 'delivered', null],
    ['rejected', 'sent', null],
    ['failed', 'sent', null],
  ];
  for (const [from, to, expected] of table) {
    assert.deepEqual(planTransition(from, to), expected, `${from} → ${to}`);
  }
  assert.deepEqual(planTransition('undelivered', 'delivered', true), ['delivered'], 'late receipt after a ttl expiry');
  assert.deepEqual(planTransition('undelivered', 'seen', true), ['delivered', 'seen']);
  assert.equal(planTransition('undelivered', 'failed', true), null);
});

test('planReceiptTransition: an SMS receipt through a registered ref means the carrier took it', () => {
  const table: Array<[Parameters<typeof planReceiptTransition>[0], AttemptState, AttemptState, AttemptState[] | null]> = [
    // A long SMS whose last part is not accepted yet: through `sent` (charged, D3).
    ['sms', 'sending', 'undelivered', ['sent', 'undelivered']],
    ['sms', 'sending', 'rejected', ['sent', 'rejected']],
    ['sms', 'sending', 'failed', ['sent', 'failed']],
    ['sms', 'sending', 'delivered', ['sent', 'delivered']],
    ['sms', 'sending', 'sent', ['sent']],
    ['sms', 'sent', 'undelivered', ['undelivered']],
    ['sms', 'undelivered', 'delivered', null],
    // A wamid is registered before Meta took the message: a failure from `sending` stays one (refunded).
    ['whatsapp_text', 'sending', 'undelivered', ['undelivered']],
    ['whatsapp_template', 'sending', 'failed', ['failed']],
    ['viber', 'sending', 'undelivered', ['undelivered']],
    ['viber', 'sending', 'delivered', ['sent', 'delivered']],
  ];
  for (const [channel, from, to, expected] of table) {
    assert.deepEqual(planReceiptTransition(channel, from, to), expected, `${channel}: ${from} → ${to}`);
  }
  assert.deepEqual(planReceiptTransition('sms', 'undelivered', 'delivered', true), ['delivered'], 'late receipt after a ttl expiry');
});

test('step success conditions and ttl expiry', () => {
  assert.equal(isStepSuccess('sms', 'sent'), true);
  assert.equal(isStepSuccess('viber', 'sent'), false);
  assert.equal(isStepSuccess('viber', 'seen'), true);
  assert.equal(isStepSuccess('whatsapp_template', 'delivered'), true);
  assert.equal(ttlExpiryApplies('sms', 'sent'), false);
  assert.equal(ttlExpiryApplies('sms', 'sending'), true);
  assert.equal(ttlExpiryApplies('viber', 'sent'), true);
  assert.equal(ttlExpiryApplies('viber', 'undelivered'), false);
  assert.equal(defaultTtlMinutes(0, 2), 10);
  assert.equal(defaultTtlMinutes(1, 2), 1440);
  const flow = [{ viber: { sender: 'Shop', ttl: 5 } }, { whatsapp_text: { sender: '100' } }, { sms: { ttl: 30 } }] as unknown as FlowStep[];
  const rows: Array<[number, number]> = [[0, 5], [1, 10], [2, 30]];
  for (const [index, minutes] of rows) assert.equal(stepTtlMinutes(flow, index), minutes, `step ${index}`);
  assert.equal(stepTtlMinutes(flow.slice(0, 2), 1), 1440, 'the last step without its own ttl');
});

test('startsNextStep: a step that ends without having met its condition moves the flow on; one that met it does not', () => {
  const rows: Array<[channel: 'sms' | 'viber' | 'whatsapp_text', state: AttemptState, reachedSent: boolean, moves: boolean]> = [
    // SMS succeeds at sent: refused before it (submit error, no route) moves on; a later receipt does not.
    ['sms', 'rejected', false, true],
    ['sms', 'failed', false, true],
    ['sms', 'undelivered', false, true],
    ['sms', 'undelivered', true, false],
    ['sms', 'rejected', true, false],
    ['sms', 'failed', true, false],
    ['sms', 'delivered', true, false],
    ['sms', 'sent', true, false],
    // Viber and WhatsApp succeed at delivered: undelivered after sent still moves on.
    ['viber', 'undelivered', true, true],
    ['viber', 'failed', true, true],
    ['viber', 'undelivered', false, true],
    ['whatsapp_text', 'undelivered', true, true],
    ['viber', 'seen', true, false],
    ['viber', 'sent', true, false],
  ];
  for (const [channel, state, reachedSent, moves] of rows) {
    assert.equal(startsNextStep(channel, state, reachedSent), moves, `${channel} ${state} reachedSent=${reachedSent}`);
  }
});

test('the sandbox outcome table of D10', () => {
  const states = (channel: 'sms' | 'viber', phone: string) => sandboxScript(channel, phone, 5000).map((s) => s.state);
  assert.deepEqual(states('sms', '420777000000'), ['sent', 'delivered']);
  assert.deepEqual(states('viber', '420777000000'), ['sent', 'delivered', 'seen']);
  assert.deepEqual(states('sms', '420777000001'), ['sent', 'undelivered']);
  assert.deepEqual(states('sms', '420777000002'), ['failed']);
  assert.deepEqual(states('viber', '420777000003'), ['sent']);
  assert.deepEqual(states('sms', '420777000004'), ['sent', 'delivered']);
  assert.equal(sandboxScript('sms', '420777000004', 5000)[1]!.afterMs, 5000);
  assert.deepEqual(states('viber', '420777000004'), ['undelivered']);
  assert.deepEqual(states('sms', '420777000005'), ['rejected']);
});

test('refunds: an attempt that ends without reaching sent, except by its ttl', () => {
  const cases: Array<[AttemptState, boolean, boolean, boolean]> = [
    // state, reached sent, by ttl, refunded
    ['failed', false, false, true],
    ['rejected', false, false, true],
    ['undelivered', false, false, true],
    ['undelivered', false, true, false],
    ['undelivered', true, false, false],
    ['failed', true, false, false],
    ['delivered', true, false, false],
    ['seen', true, false, false],
    ['sent', true, false, false],
    ['sending', false, false, false],
  ];
  for (const [state, reachedSent, byTtl, expected] of cases) {
    assert.equal(isRefunded(state, reachedSent, byTtl), expected, `${state} reachedSent=${reachedSent} ttl=${byTtl}`);
  }
});

test('isLateSent: a sent after a failure that skipped it is reported once; nothing else is', () => {
  const cases: Array<[channel: 'sms' | 'viber' | 'whatsapp_template' | 'whatsapp_text', current: AttemptState, target: AttemptState, reachedSent: boolean, late: boolean]> = [
    ['whatsapp_template', 'undelivered', 'sent', false, true],
    ['whatsapp_text', 'failed', 'sent', false, true],
    ['viber', 'rejected', 'sent', false, true],
    ['viber', 'undelivered', 'sent', false, true],
    ['sms', 'failed', 'sent', false, false], // sent is SMS's success: never after a failure
    ['sms', 'undelivered', 'sent', false, false],
    ['whatsapp_template', 'undelivered', 'sent', true, false], // it passed through sent: a repeat
    ['viber', 'failed', 'sent', true, false],
    ['whatsapp_template', 'sending', 'sent', false, false], // a move, not a late report
    ['whatsapp_template', 'sent', 'sent', true, false],
    ['whatsapp_template', 'delivered', 'sent', true, false],
    ['viber', 'seen', 'sent', true, false],
    ['whatsapp_template', 'undelivered', 'delivered', false, false],
    ['viber', 'failed', 'undelivered', false, false],
  ];
  for (const [channel, current, target, reachedSent, late] of cases) {
    assert.equal(isLateSent(channel, current, target, reachedSent), late, `${channel}: ${current} ← ${target} (reached sent: ${reachedSent})`);
    if (late) assert.equal(planTransition(current, target), null, 'never a move of the state path');
  }
});

test('keepsEarlierReceipt: of two receipts kept for one ref, the one further along stays; at the same rank the later', () => {
  const cases: Array<[earlier: AttemptState, later: AttemptState, keepsEarlier: boolean]> = [
    ['failed', 'sent', true], // Meta's failed before the sent that preceded it: the failure stays
    ['undelivered', 'sent', true],
    ['delivered', 'sent', true], // a DELIVRD, then an ENROUTE retried after it
    ['seen', 'delivered', true],
    ['sent', 'delivered', false], // in order
    ['sent', 'failed', false],
    ['delivered', 'seen', false],
    ['delivered', 'undelivered', false], // the same rank: the later one, a carrier's correction
    ['undelivered', 'delivered', false],
    ['failed', 'rejected', false],
    ['sent', 'sent', false], // a repeat: either
  ];
  for (const [earlier, later, keeps] of cases) {
    assert.equal(keepsEarlierReceipt(earlier, later), keeps, `${earlier} then ${later}`);
  }
});
