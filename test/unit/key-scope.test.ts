import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KEY_SCOPES, keyAllows, type KeyScope, type KeyUse } from '../../shared/domain/keys.js';

test('a key scope covers its side of the service: full both, api only sending, rest-api only the REST API', () => {
  const table: Array<[KeyScope, KeyUse, boolean]> = [
    ['full', 'send', true], ['full', 'rest', true],
    ['api', 'send', true], ['api', 'rest', false],
    ['rest-api', 'send', false], ['rest-api', 'rest', true],
  ];
  for (const [scope, use, allowed] of table) {
    assert.equal(keyAllows(scope, use), allowed, `${scope} ${use}`);
  }
  assert.deepEqual([...KEY_SCOPES].sort(), ['api', 'full', 'rest-api']);
});
