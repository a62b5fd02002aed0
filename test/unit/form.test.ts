/** Form-encoded text decoded strictly (api/middleware/form.ts): what URLSearchParams reads, except bytes that are not text. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { charsetOf, formDecoder, parseForm, type FormDecoder } from '../../api/middleware/form.js';

const utf8 = formDecoder(null) as FormDecoder;
const cp1250 = formDecoder('windows-1250') as FormDecoder;
const latin = (s: string) => Buffer.from(s, 'latin1');

test('parseForm reads what URLSearchParams reads when every field is UTF-8', () => {
  const cases = [
    '',
    'a=1&b=2',
    'a=1&a=2&b',
    '&&a=&=x&b==c',
    'message=Dobr%C3%BD+den&sender=Acme',
    'x=%zz&y=%4&z=%41%42',
    'plus=a+b%2Bc',
    'emoji=%F0%9F%98%80',
    'toString=1&__proto__=2&constructor=3',
  ];
  for (const text of cases) {
    const first = new Map<string, string>();
    for (const [name, value] of new URLSearchParams(text)) {
      if (!first.has(name)) first.set(name, value);
    }
    const expected = Object.fromEntries(first);
    const parsed = parseForm(latin(text), utf8);
    assert.equal(parsed.badField, null, text);
    assert.deepEqual({ ...parsed.values }, expected, text);
  }
});

test('parseForm names the first field whose bytes are not text in the form\'s character set', () => {
  const table: Array<[string, FormDecoder, string | null, Record<string, string>]> = [
    // windows-1250 `ý` (0xFD) percent-escaped or raw, read as UTF-8: refused, not U+FFFD.
    ['apikey=k&message=Dobr%FD+den', utf8, 'message', { apikey: 'k' }],
    ['message=Dobr\xFD+den', utf8, 'message', {}],
    ['a=%C3&b=ok', utf8, 'a', { b: 'ok' }],
    ['%FF=1&b=%ED%A0%80', utf8, '(field name)', {}],
    ['b=%ED%A0%80&c=%FF', utf8, 'b', {}],
    // The same bytes in the character set the client named: read as it meant them.
    ['apikey=k&message=Dobr%FD+den', cp1250, null, { apikey: 'k', message: 'Dobrý den' }],
    ['message=%8A%9A', cp1250, null, { message: 'Šš' }],
  ];
  for (const [text, decoder, badField, values] of table) {
    const parsed = parseForm(latin(text), decoder);
    assert.equal(parsed.badField, badField, text);
    assert.deepEqual({ ...parsed.values }, values, text);
  }
});

test('charsetOf and formDecoder: the Content-Type\'s charset, UTF-8 without one, UTF-16 and unknown sets refused', () => {
  assert.equal(charsetOf(undefined), null);
  assert.equal(charsetOf('application/x-www-form-urlencoded'), null);
  assert.equal(charsetOf('application/x-www-form-urlencoded; charset=UTF-8'), 'utf-8');
  assert.equal(charsetOf('application/x-www-form-urlencoded;Charset="windows-1250"'), 'windows-1250');
  assert.equal(charsetOf('application/x-www-form-urlencoded; charset='), null);
  assert.equal((formDecoder(null) as FormDecoder).encoding, 'utf-8');
  assert.equal((formDecoder('iso-8859-2') as FormDecoder).encoding, 'iso-8859-2');
  assert.equal(formDecoder('utf-16le'), 'charset utf-16le is not supported for forms; send the form in UTF-8');
  assert.equal(formDecoder('x-klingon'), 'charset x-klingon is not supported; send the form in UTF-8');
});
