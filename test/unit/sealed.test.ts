/** Carrier credentials at rest: sealed with CREDENTIALS_KEY and bound to their row. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SecretBox, SealedError } from '../../shared/secrets/sealed.js';

const box = new SecretBox(Buffer.alloc(32, 1));

test('sealed credentials open with the same key and row, and reveal nothing of themselves', () => {
  const sealed = box.seal({ password: 'hunter2', token: 'EAAG…' }, 'carrier-connection:main');
  assert.ok(!sealed.includes(Buffer.from('hunter2')));
  assert.deepEqual(box.open(sealed, 'carrier-connection:main'), { password: 'hunter2', token: 'EAAG…' });
  assert.notDeepEqual(box.seal({ a: 'b' }, 'x'), box.seal({ a: 'b' }, 'x'), 'a fresh nonce each time');
});

test('another row, another key or changed bytes do not open', () => {
  const sealed = box.seal({ password: 'hunter2' }, 'carrier-connection:main');
  assert.throws(() => box.open(sealed, 'carrier-connection:other'), SealedError);
  assert.throws(() => new SecretBox(Buffer.alloc(32, 2)).open(sealed, 'carrier-connection:main'), SealedError);
  const tampered = Buffer.from(sealed);
  tampered[tampered.length - 1]! ^= 1;
  assert.throws(() => box.open(tampered, 'carrier-connection:main'), SealedError);
  assert.throws(() => box.open(Buffer.from([9, 1, 2]), 'x'), SealedError);
  assert.throws(() => new SecretBox(Buffer.alloc(16)), RangeError);
});

test('the key fingerprint tells keys apart and reveals nothing of the key', () => {
  assert.deepEqual(box.fingerprint(), new SecretBox(Buffer.alloc(32, 1)).fingerprint());
  assert.notDeepEqual(box.fingerprint(), new SecretBox(Buffer.alloc(32, 2)).fingerprint());
  assert.ok(!box.fingerprint().includes(Buffer.alloc(32, 1)));
});
