import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import {
  generateCode, hashCode, codeMatches, encryptCode, decryptCode, fillTemplate, maskedTemplate, CODE_MASK,
} from '../../shared/verification/codes.js';
import { mintToken, parseToken } from '../../shared/verification/tokens.js';
import { computeProof, proofMatches, checkProof, proofExpired, proofMessage, PROOF_VALIDITY_MS } from '../../shared/verification/proof.js';
import { deriveKeys } from '../../shared/verification/secrets.js';
import { maskDigits } from '../../shared/verification/hooks.js';

const keys = deriveKeys(randomBytes(32));

test('codes are 6 digits, zero-padded, and spread over the whole range', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const code = generateCode();
    assert.match(code, /^\d{6}$/);
    seen.add(code);
  }
  assert.ok(seen.size > 1990, 'practically no repeats in 2000 draws');
});

test('code hashes are keyed and bound to the token', () => {
  const a = mintToken(keys.token, 1);
  const b = mintToken(keys.token, 1);
  const h = hashCode(keys.codeHash, a, '123456');
  assert.equal(h.length, 32);
  assert.ok(!h.toString('hex').includes('123456'));
  assert.ok(codeMatches(keys.codeHash, a, '123456', h));
  assert.ok(!codeMatches(keys.codeHash, a, '123457', h), 'another code');
  assert.ok(!codeMatches(keys.codeHash, b, '123456', h), 'same code, other token: other hash');
  assert.notDeepEqual(hashCode(keys.codeHash, b, '123456'), h);
  assert.notDeepEqual(hashCode(deriveKeys(randomBytes(32)).codeHash, a, '123456'), h, 'another server key');
  assert.ok(!codeMatches(keys.codeHash, a, '123456', h.subarray(0, 16)), 'a truncated hash never matches');
});

test('the encrypted copy round-trips and refuses tampering, another token and another key', () => {
  const token = mintToken(keys.token, 7);
  const enc = encryptCode(keys.codeEnc, token, '004711');
  assert.ok(!enc.includes('004711'));
  assert.equal(decryptCode(keys.codeEnc, token, enc), '004711');
  assert.notEqual(encryptCode(keys.codeEnc, token, '004711'), enc, 'random IV');
  assert.equal(decryptCode(keys.codeEnc, mintToken(keys.token, 7), enc), null, 'bound to its token');
  assert.equal(decryptCode(deriveKeys(randomBytes(32)).codeEnc, token, enc), null);
  const raw = Buffer.from(enc.slice(3), 'base64url');
  raw[raw.length - 1]! ^= 1;
  assert.equal(decryptCode(keys.codeEnc, token, `v1.${raw.toString('base64url')}`), null);
  assert.equal(decryptCode(keys.codeEnc, token, 'garbage'), null);
  assert.equal(decryptCode(keys.codeEnc, token, 'v1.'), null);
});

test('templates are filled and masked', () => {
  assert.equal(fillTemplate('Your code is {code}. Again: {code}', '012345'), 'Your code is 012345. Again: 012345');
  assert.equal(maskedTemplate('Code {code}'), `Code ${CODE_MASK}`);
  assert.equal(maskDigits('Code 012345, call 0800'), 'Code ******, call 0800');
});

test('tokens name their account and survive a round trip', () => {
  const token = mintToken(keys.token, 42);
  assert.match(token, /^42\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{22}$/);
  assert.deepEqual(parseToken(keys.token, token), { accountId: 42 });
  assert.equal(encodeURIComponent(token), token, 'URL-safe as is');
  assert.notEqual(mintToken(keys.token, 42), token);
  assert.throws(() => mintToken(keys.token, 0));
});

test('tokens cannot be forged into another account or edited', () => {
  const token = mintToken(keys.token, 42);
  const [, random, mac] = token.split('.') as [string, string, string];
  assert.equal(parseToken(keys.token, `43.${random}.${mac}`), null, 'other account id, same MAC');
  assert.equal(parseToken(keys.token, `042.${random}.${mac}`), null, 'leading zero');
  const flipped = random.slice(0, -1) + (random.endsWith('A') ? 'B' : 'A');
  assert.equal(parseToken(keys.token, `42.${flipped}.${mac}`), null, 'edited random part');
  assert.equal(parseToken(deriveKeys(randomBytes(32)).token, token), null, 'another server key');
  // A MAC computed by someone without the server key:
  const guess = createHmac('sha256', 'guess').update(`43.${random}`).digest().subarray(0, 16).toString('base64url');
  assert.equal(parseToken(keys.token, `43.${random}.${guess}`), null);
  for (const bad of ['', 'x', '42', '42..', `${token}.x`, ` ${token}`, token.toUpperCase(), 42, null, undefined, {}]) {
    assert.equal(parseToken(keys.token, bad), null, `refuses ${String(bad)}`);
  }
});

const input = { phoneNumber: '420777123456', token: '5.AAAAAAAAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBB', code: '012345', timestamp: '2026-11-22T03:09:06.123Z' };
const secret = 'account-secret-0123456789';

test('a proof is lowercase hex HMAC-SHA256 of phoneNumber|token|code|timestamp keyed by the account secret', () => {
  assert.equal(proofMessage(input), `420777123456|${input.token}|012345|2026-11-22T03:09:06.123Z`);
  const expected = createHmac('sha256', secret).update(`420777123456|${input.token}|012345|2026-11-22T03:09:06.123Z`).digest('hex');
  const proof = computeProof(secret, input);
  assert.equal(proof, expected);
  assert.match(proof, /^[0-9a-f]{64}$/);
  assert.ok(proofMatches(secret, input, proof));
});

test('a proof fails when any part changes, when tampered with, or with another secret', () => {
  const proof = computeProof(secret, input);
  for (const field of ['phoneNumber', 'token', 'code', 'timestamp'] as const) {
    assert.ok(!proofMatches(secret, { ...input, [field]: `${input[field]}0` }, proof), field);
  }
  const tampered = (proof[0] === 'a' ? 'b' : 'a') + proof.slice(1);
  assert.ok(!proofMatches(secret, input, tampered));
  assert.ok(!proofMatches(secret, input, proof.toUpperCase()), 'exactly lowercase hex');
  assert.ok(!proofMatches(secret, input, proof.slice(0, 63)));
  assert.ok(!proofMatches('another-secret-0123456789', input, proof));
  // A timestamp given in another ISO form is another message.
  assert.ok(!proofMatches(secret, { ...input, timestamp: '2026-11-22T03:09:06.123+00:00' }, proof));
});

test('proofs are valid for 24 hours after the session timestamp', () => {
  const started = new Date(input.timestamp);
  const proof = computeProof(secret, input);
  assert.deepEqual(checkProof(secret, input, proof, new Date(started.getTime() + 1000)), { valid: true });
  assert.deepEqual(checkProof(secret, input, proof, new Date(started.getTime() + PROOF_VALIDITY_MS)), { valid: true });
  assert.deepEqual(checkProof(secret, input, proof, new Date(started.getTime() + PROOF_VALIDITY_MS + 1)), { valid: false, expired: true });
  assert.deepEqual(checkProof(secret, input, 'f'.repeat(64), new Date(started.getTime() + PROOF_VALIDITY_MS + 1)), { valid: false },
    'a wrong proof is just invalid, never "expired"');
  assert.deepEqual(checkProof(null, input, proof, started), { valid: false }, 'no secret: nothing is valid');
  assert.equal(proofExpired('not a date', started), true);
  assert.equal(proofExpired(started, started), false);
});

test('purpose keys are distinct and stable for one master secret', () => {
  const master = randomBytes(32);
  const a = deriveKeys(master);
  const b = deriveKeys(master);
  assert.deepEqual(a, b);
  const all = [a.token, a.codeHash, a.codeEnc, a.proofStore].map((k) => k.toString('hex'));
  assert.equal(new Set(all).size, 4);
  assert.ok(all.every((k) => k.length === 64));
});

test('the example in docs/verification.md is right', () => {
  const proof = computeProof('my-verification-secret-0123456789', {
    phoneNumber: '420777123456', token: '12.q3M1mVbW2o0bJ0nWc1uQXw.3rD3xq4m8oF1c9lK3H2a7g', code: '042137', timestamp: '2026-11-22T03:09:06.123Z',
  });
  assert.equal(proof, '06fb5b58f7ef63b19b3fa1a779183c9b7cda103c3a6ad4a6c1546983b2f0ee9b');
});
