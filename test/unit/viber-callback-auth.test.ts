import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  authorizeCallback, invalidSourceEntries, secretEquals, sourceAllowed, type CallbackAuthConfig, type CallbackAuthRequest,
} from '../../shared/carriers/viber/callback-auth.js';

const TOKEN = 'tok_3f9a0c1e5b7d4a2f8e6c';
const SECRET = 'shared-secret-value';

describe('sourceAllowed', () => {
  const list = ['203.0.113.7', '198.51.100.0/24', '2001:db8::/32', '::1', '::ffff:192.0.2.0/120', ' 10.0.0.1 ', 'not-an-ip', '10.0.0.0/33'];
  const cases: Array<[string, boolean]> = [
    ['203.0.113.7', true],
    ['203.0.113.8', false],
    ['198.51.100.0', true],
    ['198.51.100.255', true],
    ['198.51.101.1', false],
    ['::ffff:198.51.100.9', true], // IPv4-mapped peer matches an IPv4 range
    ['::ffff:203.0.113.7', true],
    ['::FFFF:203.0.113.7', true],
    ['192.0.2.77', true], // mapped range entry (/120 = /24 of IPv4)
    ['192.0.3.1', false],
    ['2001:db8:1::5', true],
    ['2001:db9::1', false],
    ['::1', true],
    ['[::1]', true],
    ['fe80::1%eth0', false],
    ['10.0.0.1', true], // entry with spaces
    ['10.0.0.2', false], // "/33" entry is invalid and matches nothing
    ['127.0.0.1', false],
    ['', false],
    ['0177.0.0.1', false], // lenient forms are not addresses
    ['garbage', false],
  ];
  for (const [addr, expected] of cases) {
    it(`${addr || '(empty)'} → ${expected}`, () => assert.equal(sourceAllowed(addr, list), expected));
  }

  it('names the entries that do not parse', () => {
    assert.deepEqual(invalidSourceEntries(list), ['not-an-ip', '10.0.0.0/33']);
    assert.deepEqual(invalidSourceEntries(['0.0.0.0/0', '::/0', '1.2.3.4/32', '::ffff:0:0/96']), []);
    assert.deepEqual(invalidSourceEntries(['1.2.3.4/', '1.2.3.4/x', '::ffff:1.2.3.4/95']), ['1.2.3.4/', '1.2.3.4/x', '::ffff:1.2.3.4/95']);
  });
});

describe('secretEquals', () => {
  it('compares whole values, any length; an empty expected value never matches', () => {
    assert.equal(secretEquals(TOKEN, TOKEN), true);
    assert.equal(secretEquals(`${TOKEN}x`, TOKEN), false);
    assert.equal(secretEquals(TOKEN.slice(0, -1), TOKEN), false);
    assert.equal(secretEquals('', ''), false);
  });
});

describe('authorizeCallback', () => {
  const req = (patch: Partial<CallbackAuthRequest>): CallbackAuthRequest => ({ subpath: '', headers: {}, remoteAddress: '127.0.0.1', ...patch });
  const plain: CallbackAuthConfig = { callbackToken: TOKEN };
  const full: CallbackAuthConfig = { callbackToken: TOKEN, sharedSecret: SECRET, allowedSources: ['10.1.0.0/16', '::1'] };
  const ok = { ok: true } as const;
  const cases: Array<[string, CallbackAuthRequest, CallbackAuthConfig, unknown]> = [
    ['token as the path segment', req({ subpath: `/${TOKEN}` }), plain, ok],
    ['token with a trailing slash', req({ subpath: `/${TOKEN}/` }), plain, ok],
    ['token as the last of several segments', req({ subpath: `/v1/${TOKEN}` }), plain, ok],
    ['token in the header', req({ headers: { 'x-callback-token': TOKEN } }), plain, ok],
    ['wrong path token, right header', req({ subpath: '/nope', headers: { 'x-callback-token': TOKEN } }), plain, ok],
    ['percent-encoded token', req({ subpath: `/${encodeURIComponent(TOKEN)}` }), plain, ok],
    ['no token', req({}), plain, { ok: false, status: 401, reason: 'callback token missing' }],
    ['wrong token', req({ subpath: '/tok_guess' }), plain, { ok: false, status: 401, reason: 'callback token does not match' }],
    ['token prefix', req({ subpath: `/${TOKEN.slice(0, 10)}` }), plain, { ok: false, status: 401, reason: 'callback token does not match' }],
    ['token not last', req({ subpath: `/${TOKEN}/extra` }), plain, { ok: false, status: 401, reason: 'callback token does not match' }],
    ['bad percent-encoding', req({ subpath: '/%E0%A4%A' }), plain, { ok: false, status: 401, reason: 'callback token missing' }],
    ['no token configured', req({ subpath: '/' }), { callbackToken: '' }, { ok: false, status: 401, reason: 'callback token missing' }],
    ['empty configured token never matches', req({ subpath: '/x' }), { callbackToken: '' }, { ok: false, status: 401, reason: 'callback token does not match' }],
    ['all checks pass', req({ subpath: `/${TOKEN}`, headers: { 'x-callback-secret': SECRET }, remoteAddress: '10.1.2.3' }), full, ok],
    ['mapped IPv6 peer', req({ subpath: `/${TOKEN}`, headers: { 'x-callback-secret': SECRET }, remoteAddress: '::ffff:10.1.2.3' }), full, ok],
    ['IPv6 loopback peer', req({ subpath: `/${TOKEN}`, headers: { 'x-callback-secret': SECRET }, remoteAddress: '::1' }), full, ok],
    ['source outside the list', req({ subpath: `/${TOKEN}`, headers: { 'x-callback-secret': SECRET }, remoteAddress: '10.2.0.1' }), full,
      { ok: false, status: 403, reason: 'source address 10.2.0.1 is not allowed' }],
    ['source checked before the token', req({ remoteAddress: '127.0.0.1' }), full, { ok: false, status: 403, reason: 'source address 127.0.0.1 is not allowed' }],
    ['secret missing', req({ subpath: `/${TOKEN}`, remoteAddress: '10.1.2.3' }), full, { ok: false, status: 401, reason: 'x-callback-secret header missing' }],
    ['secret wrong', req({ subpath: `/${TOKEN}`, headers: { 'x-callback-secret': 'guess' }, remoteAddress: '10.1.2.3' }), full,
      { ok: false, status: 401, reason: 'x-callback-secret header does not match' }],
    ['empty allowlist = any source', req({ subpath: `/${TOKEN}`, remoteAddress: '203.0.113.1' }), { callbackToken: TOKEN, allowedSources: [] }, ok],
  ];
  for (const [name, request, cfg, expected] of cases) {
    it(name, () => assert.deepEqual(authorizeCallback(request, cfg), expected));
  }

  it('never puts a secret or the token into a reason', () => {
    for (const [, request, cfg] of cases) {
      const r = authorizeCallback(request, cfg);
      if (!r.ok) {
        assert.ok(!r.reason.includes(TOKEN) && !r.reason.includes(SECRET), r.reason);
      }
    }
  });
});
