/** The WhatsApp connector's small rules: our reference, backoff, pauses, the window, webhook events → reports. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CallbackEvent } from '../../shared/carriers/http-carrier.js';
import { readEvents } from '../../shared/carriers/whatsapp/callback.js';
import { attemptIdOfRef, ourRefOf, retryDelayMs, throttlePauseMs } from '../../shared/carriers/whatsapp/policy.js';
import { WINDOW_MS, userKey, windowOpen } from '../../shared/carriers/whatsapp/window.js';
import { TemplateCache } from '../../shared/carriers/whatsapp/templates.js';
import type { GraphTemplate } from '../../shared/carriers/whatsapp/types.js';
import { createLogger } from '../../shared/logger.js';

describe('our reference in biz_opaque_callback_data', () => {
  it('round-trips an attempt id and refuses anything else', () => {
    assert.equal(ourRefOf(42), 'a42');
    const table: Array<[string | undefined, number | undefined]> = [
      ['a42', 42], ['a1', 1], ['a9007199254740991', 9007199254740991],
      [undefined, undefined], ['', undefined], ['42', undefined], ['a', undefined], ['a0', undefined], ['a042', undefined],
      ['a12x', undefined], ['b12', undefined], ['a99999999999999999', undefined], ['A12', undefined],
    ];
    for (const [ref, id] of table) assert.equal(attemptIdOfRef(ref), id, String(ref));
  });
});

describe('retries', () => {
  it('doubling from 1 s (10 s after a spam limit) up to 60 s, with ±20 % jitter; what Meta asks for wins', () => {
    const table: Array<[number, number, number | undefined, number]> = [
      // tries, code, afterMs, delay at the middle of the jitter
      [1, 130429, undefined, 1000], [2, 130429, undefined, 2000], [3, 131056, undefined, 4000], [6, 131000, undefined, 32_000],
      [7, 131000, undefined, 60_000], [30, 0, undefined, 60_000], [1, 131048, undefined, 10_000], [2, 131048, undefined, 20_000],
      [4, 131048, undefined, 60_000], [3, 130429, 1500, 1500],
    ];
    for (const [tries, code, afterMs, mid] of table) {
      assert.equal(retryDelayMs(tries, code, afterMs, () => 0.5), mid, `${tries} ${code}`);
      if (afterMs === undefined) {
        assert.equal(retryDelayMs(tries, code, afterMs, () => 0), Math.round(mid * 0.8));
        assert.equal(retryDelayMs(tries, code, afterMs, () => 1), Math.round(mid * 1.2));
      }
    }
  });

  it('throttling pauses the business number; other retryable codes do not', () => {
    const table: Array<[number, number]> = [[130429, 1000], [131056, 1000], [131048, 10_000], [131000, 0], [0, 0], [80007, 0], [131026, 0]];
    for (const [code, ms] of table) assert.equal(throttlePauseMs(code), ms, String(code));
  });
});

describe('24-hour window', () => {
  it('open for 24 hours after the latest inbound, closed without one', () => {
    const now = Date.UTC(2026, 0, 2, 12);
    const table: Array<[number | undefined, boolean]> = [
      [undefined, false], [now, true], [now - 1000, true], [now - WINDOW_MS + 1, true], [now - WINDOW_MS, false], [now - 2 * WINDOW_MS, false],
      [now + 5000, true],
    ];
    for (const [last, open] of table) assert.equal(windowOpen(last, now), open, String(last));
  });

  it('people are keyed by digits on both sides', () => {
    assert.equal(userKey('+420 777 123 456'), '420777123456');
    assert.equal(userKey('420777123456'), '420777123456');
  });
});

describe('webhook events → reports, inbound and windows', () => {
  const C = 'whatsapp.main';
  it('statuses by our reference, else by wamid; read → seen, failed → undelivered with its info', () => {
    const events: CallbackEvent[] = [
      { kind: 'receipt', carrierRef: 'wamid.1', ourRef: 'a7', status: 'sent', at: 1000 },
      { kind: 'receipt', carrierRef: 'wamid.1', ourRef: 'a7', status: 'seen', at: 3000 },
      { kind: 'receipt', carrierRef: 'wamid.2', status: 'delivered', at: 2000 },
      { kind: 'receipt', carrierRef: 'wamid.3', ourRef: 'a9', status: 'undelivered', code: 131026, info: '[131026] Message Undeliverable', at: 4000 },
      { kind: 'receipt', carrierRef: 'wamid.4', ourRef: 'a10', status: 'undelivered', code: 131042, info: '[131042] Business eligibility payment issue', at: 5000 },
      { kind: 'receipt', carrierRef: 'wamid.5', ourRef: 'not-ours', status: 'sent', at: 6000 },
    ];
    const out = readEvents(events, C);
    assert.deepEqual(out.reports, [
      // By our reference, for an attempt of this connection only (the status path checks it).
      { attemptId: 7, carrier: C, state: 'sent', resultInfo: 'Sent', at: 1000 },
      { attemptId: 7, carrier: C, state: 'seen', resultInfo: '[0] Seen', at: 3000 },
      { attemptId: 9, carrier: C, state: 'undelivered', resultInfo: '[131026] Message Undeliverable', at: 4000 },
      { attemptId: 10, carrier: C, state: 'undelivered', resultInfo: '[131042] Business eligibility payment issue', at: 5000 },
    ]);
    assert.deepEqual(out.byRef, [
      { carrier: C, ref: 'wamid.2', state: 'delivered', resultInfo: '[0] Delivered', at: 2000 },
      { carrier: C, ref: 'wamid.5', state: 'sent', resultInfo: 'Sent', at: 6000 },
    ]);
    assert.deepEqual(out.configCodes, [131042]);
    assert.deepEqual(out.inbound, []);
  });

  it('inbound texts: the business number as recipient, the quoted wamid as replyTo; a number-less person opens no window', () => {
    const events: CallbackEvent[] = [
      { kind: 'inbound', from: '420777000001', to: '1065', text: 'Yes', at: 1000, carrierRef: 'wamid.in1', replyToCarrierRef: 'wamid.out1' },
      { kind: 'inbound', from: '420777000002', to: '1065', text: 'Hi', at: 2000, carrierRef: 'wamid.in2' },
      { kind: 'inbound', fromUserId: 'CZ.abc', to: '1065', text: 'Who?', at: 3000, carrierRef: 'wamid.in3' },
    ];
    const out = readEvents(events, C);
    assert.deepEqual(out.inbound, [
      // Each with its wamid: a message Meta delivers again is stored once (inbound.ts).
      { gateway: 'whatsapp', sender: '420777000001', recipient: '1065', body: 'Yes', at: 1000, carrierRef: 'wamid.in1', replyTo: { carrier: C, ref: 'wamid.out1' } },
      { gateway: 'whatsapp', sender: '420777000002', recipient: '1065', body: 'Hi', at: 2000, carrierRef: 'wamid.in2' },
      { gateway: 'whatsapp', sender: 'CZ.abc', recipient: '1065', body: 'Who?', at: 3000, carrierRef: 'wamid.in3' },
    ]);
    assert.deepEqual(out.windows, [
      { phoneNumberId: '1065', user: '420777000001', at: 1000 },
      { phoneNumberId: '1065', user: '420777000002', at: 2000 },
    ]);
  });
});

describe('template cache', () => {
  /** A Graph whose template list is read by hand: each call waits until the test answers it. */
  function graph() {
    const calls: Array<{ wabaId: string; answer(list: GraphTemplate[] | Error): void }> = [];
    return {
      calls,
      listTemplates: (wabaId: string) => new Promise<GraphTemplate[]>((resolve, reject) => {
        calls.push({ wabaId, answer: (list) => (list instanceof Error ? reject(list) : resolve(list)) });
      }),
    };
  }
  const logger = createLogger('silent');
  const t = (name: string): GraphTemplate => ({ name, language: 'en_US' });

  it('one read per WABA for concurrent sends; fresh for its ttl; a stale list serves while the next loads', async () => {
    const g = graph();
    const cache = new TemplateCache(g, logger, 1000, 500);
    const a = cache.get('w1', 'tok', 0);
    const b = cache.get('w1', 'tok', 0);
    assert.equal(g.calls.length, 1);
    g.calls[0]!.answer([t('one')]);
    assert.deepEqual(await a, [t('one')]);
    assert.deepEqual(await b, [t('one')]);
    assert.deepEqual(await cache.get('w1', 'tok', 500), [t('one')]);
    assert.equal(g.calls.length, 1, 'fresh');
    const later = Date.now() + 5000;
    assert.deepEqual(await cache.get('w1', 'tok', later), [t('one')], 'the old list while the new one loads');
    assert.equal(g.calls.length, 2);
    g.calls[1]!.answer([t('two')]);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(await cache.get('w1', 'tok', Date.now()), [t('two')]);
  });

  it('a failed read gives null and is tried again after the retry pause; invalidate reads again at once', async () => {
    const g = graph();
    const cache = new TemplateCache(g, logger, 60_000, 30_000);
    const first = cache.get('w2', 'tok');
    g.calls[0]!.answer(new Error('[190] token expired'));
    assert.equal(await first, null);
    assert.equal(await cache.get('w2', 'tok'), null, 'not asked again at once');
    assert.equal(g.calls.length, 1);
    cache.invalidate('w2');
    const again = cache.get('w2', 'tok');
    assert.equal(g.calls.length, 2);
    g.calls[1]!.answer([t('x')]);
    assert.deepEqual(await again, [t('x')]);
  });
});
