import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseStrictJson } from '../../shared/strict-json.js';

test('valid JSON passes through unchanged', () => {
  for (const text of ['{}', '[]', '"x"', '1', 'null', '{"a":{"b":[1,{"c":"}\\"{"}]},"d":"\\\\"}', '[{"a":1},{"a":2}]']) {
    const result = parseStrictJson(text);
    assert.ok(result.ok, text);
    assert.deepEqual(result.value, JSON.parse(text));
  }
});

test('duplicate keys are refused with their place', () => {
  const table: Array<[string, RegExp]> = [
    ['{"a":1,"a":2}', /Duplicate key "a" at the top level/],
    ['[{"body":"x","b\\u006fdy":"y"}]', /Duplicate key "body" at \[0\]/],
    ['[{"to":[{"p":1},{"p":2,"p":3}]}]', /Duplicate key "p" at \[0\]\.to\[1\]/],
    ['[{"x":1},{"payload":{"k":1,"k":1}}]', /Duplicate key "k" at \[1\]\.payload/],
  ];
  for (const [text, message] of table) {
    const result = parseStrictJson(text);
    assert.equal(result.ok, false, text);
    assert.match((result as { message: string }).message, message);
  }
  assert.ok(parseStrictJson('[{"a":1},{"a":1}]').ok, 'the same key in sibling objects is fine');
});

test('nesting depth is capped and syntax errors are explained', () => {
  assert.ok(parseStrictJson(`${'['.repeat(32)}${']'.repeat(32)}`).ok);
  const deep = parseStrictJson(`${'['.repeat(33)}${']'.repeat(33)}`);
  assert.equal(deep.ok, false);
  assert.match((deep as { message: string }).message, /nested too deeply/);
  const bad = parseStrictJson('{"a" 1}');
  assert.equal(bad.ok, false);
  assert.match((bad as { message: string }).message, /^Invalid JSON/);
});

test('the exact text of each message object payload is captured', () => {
  const batch = parseStrictJson('[{"payload": {"b":1,"2":2,"x":1.0} , "body":"x"},{"body":"y"},{"to":[{"payload":1}],"payload" :[1, {"a":"]}"}] }]');
  assert.ok(batch.ok);
  assert.equal(batch.payloads[0], '{"b":1,"2":2,"x":1.0}');
  assert.equal(batch.payloads[1], undefined);
  assert.equal(batch.payloads[2], '[1, {"a":"]}"}]');
  const single = parseStrictJson('{"body":"x","payload":{"z":1,"a":"\\u00e9"}}');
  assert.ok(single.ok);
  assert.deepEqual(single.payloads, ['{"z":1,"a":"\\u00e9"}']);
});

test('a __proto__ key stays an own key that copies keep, so a schema can refuse it', () => {
  const result = parseStrictJson('[{"a":1,"__proto__":{"polluted":true}},{"b":{"\\u005f_proto__":[1]}}]');
  assert.ok(result.ok);
  const [first, second] = result.value as Array<Record<string, unknown>>;
  assert.deepEqual(Object.keys(first!), ['a', '__proto__']);
  assert.equal(Object.getPrototypeOf(first), null);
  const copy = Object.assign(Object.create(null) as object, first);
  assert.deepEqual(Object.keys(copy), ['a', '__proto__']);
  assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype was touched');
  assert.deepEqual(Object.keys((second as { b: object }).b), ['__proto__']);
  const plain = parseStrictJson('{"a":{"b":1}}');
  assert.ok(plain.ok);
  assert.equal(Object.getPrototypeOf((plain.value as { a: object }).a), Object.prototype, 'objects without the key stay ordinary');
});
