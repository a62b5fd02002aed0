import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkHttpUrl } from '../../shared/net/ssrf.js';
import { findUnstorable } from '../../shared/unstorable-text.js';

test('checkHttpUrl takes what WHATWG URL parses, over http(s), with a port in 1-65535', () => {
  const table: Array<[string, string | null]> = [
    ['https://example.com/hook', null],
    ['http://example.com:8080/x?y=1#z', null],
    ['http://example.com:65535/', null],
    ['http://user:pa%20ss@example.com/', null],
    ['http://[2001:db8::1]:443/', null],
    ['http://%zz/', 'URL is not valid'],
    ['http://example.com:99999/', 'URL is not valid'],
    ['http://example.com:65536/', 'URL is not valid'],
    ['http://example.com:0/', 'URL port must be 1-65535'],
    ['http://[::1/', 'URL is not valid'],
    ['ftp://example.com/', 'URL scheme must be http or https'],
    ['javascript:alert(1)', 'URL scheme must be http or https'],
    ['', 'URL is required'],
    [`https://example.com/${'a'.repeat(2100)}`, 'URL is longer than 2048 characters'],
  ];
  for (const [url, reason] of table) {
    const result = checkHttpUrl(url);
    assert.equal(result.ok ? null : result.reason, reason, url);
  }
});

test('findUnstorable names the first string or property name Postgres cannot store', () => {
  const table: Array<[unknown, string | null]> = [
    [{ a: 'fine', b: ['ok', { c: 'é💥' }] }, null],
    [{ a: 'x\u0000' }, 'a: must not contain NUL characters or unpaired surrogates'],
    [{ a: [{ b: 'x' }, { b: '\ud800' }] }, 'a[1].b: must not contain NUL characters or unpaired surrogates'],
    [{ a: { 'k\u0000': 1 } }, 'a: property names must not contain NUL characters or unpaired surrogates'],
    [['\udc00'], '[0]: must not contain NUL characters or unpaired surrogates'],
    ['\u0000', 'body: must not contain NUL characters or unpaired surrogates'],
    [{ when: new Date(0), n: 1, z: null }, null],
  ];
  for (const [value, problem] of table) {
    assert.equal(findUnstorable(value, ''), problem, JSON.stringify(value));
  }
});
