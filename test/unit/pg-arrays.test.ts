import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { PG_BASE } from '../support/harness.js';
import { arrayRows, boolArray, numberArray, textArray, timestampArray } from '../../shared/db/arrays.js';
import { RawJson, SentMessageBody, eventParams, stringifyEvent, type OutboxEvent } from '../../shared/engine/events.js';
import { sentMessageText } from '../../shared/engine/sent-message.js';

let client: pg.Client;
before(async () => {
  client = new pg.Client({ connectionString: PG_BASE });
  await client.connect();
});
after(async () => {
  await client.end();
});

/** What Postgres reads from `param` under `cast`, as pg hands it back. */
async function roundTrip(cast: string, param: unknown): Promise<unknown> {
  const { rows } = await client.query<{ v: unknown }>(`SELECT $1::${cast} AS v`, [param]);
  return rows[0]!.v;
}

/** Ours and pg's own serialisation of `values` must read back as `expected`. */
async function check(cast: string, literal: string, values: unknown[], expected: unknown): Promise<void> {
  assert.deepEqual(await roundTrip(cast, literal), expected, `ours: ${literal}`);
  assert.deepEqual(await roundTrip(cast, values), expected, 'pg');
}

const TEXTS: Array<[string, Array<string | null>]> = [
  ['empty array', []],
  ['plain words', ['sms', 'viber', 'whatsapp_template']],
  ['double quotes', ['"', 'say "hi"', '""', '{"a":"b"}']],
  ['backslashes', ['\\', 'a\\b', '\\\\', 'end\\', '\\"', '"\\']],
  ['commas and braces', [',', 'a,b', '{', '}', '{}', '{a,b}', '{{1}}']],
  ['spaces at both ends', [' ', '  lead', 'trail  ', '  both  ']],
  ['newlines and tabs', ['\n', 'a\nb', '\r\n', '\tx\t', 'line\u2028sep']],
  ['unicode', ['Příliš žluťoučký kůň', 'こんにちは', 'مرحبا', '😀', 'a𝄞b', '👨‍👩‍👧‍👦']],
  ['empty string', ['', '', 'x', '']],
  ['the word NULL', ['NULL', 'null', ' NULL ', '"NULL"']],
  ['actual nulls', [null, 'x', null, null]],
  ['only nulls', [null]],
  ['a JSON text', ['{"to":[{"phone_number":"+420 777\\n"}],"x":"\\u0001"}']],
];

for (const [name, values] of TEXTS) {
  test(`text[]: ${name}`, async () => {
    await check('text[]', textArray(values), values, values);
  });
}

test('json[] keeps each element text byte for byte', async () => {
  const values = ['{"a" : 1}', '[1,\n 2]', '"\\u00e9\\\\"', null, 'null'];
  await check('json[]::text[]', textArray(values), values, values);
});

const NUMBERS: Array<[string, string, Array<number | null>]> = [
  ['empty array', 'bigint[]', []],
  ['zero and negatives', 'bigint[]', [0, -1, 1, -42, 42]],
  ['up to 2^53-1', 'bigint[]', [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 2 ** 32, 2 ** 31 - 1]],
  ['nulls', 'bigint[]', [null, 7, null]],
  ['int', 'int[]', [0, -2147483648, 2147483647, null]],
  ['smallint', 'smallint[]', [0, -32768, 32767, null]],
];

for (const [name, cast, values] of NUMBERS) {
  test(`${cast}: ${name}`, async () => {
    // pg reads int8 arrays back as strings; the other integer arrays as numbers.
    const expected = cast === 'bigint[]' ? values.map((v) => (v === null ? null : String(v))) : values;
    await check(cast, numberArray(values), values, expected);
  });
}

test('numeric[]: prices and sums keep their digits', async () => {
  const values = [0, 0.35, 1.0499999999999998, -12.5, 1234.5678, 0.1 + 0.2, 1e-7, null];
  await check('numeric[]', numberArray(values), values, values);
});

const BOOLS: Array<[string, Array<boolean | null>]> = [
  ['empty array', []],
  ['both values', [true, false, false, true]],
  ['nulls', [null, true, null, false]],
];

for (const [name, values] of BOOLS) {
  test(`boolean[]: ${name}`, async () => {
    await check('boolean[]', boolArray(values), values, values);
  });
}

const TIMESTAMPS: Array<[string, Array<Date | null>]> = [
  ['empty array', []],
  ['milliseconds', [new Date('2024-03-31T01:59:59.999Z'), new Date('2024-10-27T02:30:00.001Z'), new Date(1_700_000_000_123)]],
  ['the epoch and before 1970', [new Date(0), new Date(-1), new Date('1969-12-31T23:59:59.500Z'), new Date('1901-02-03T04:05:06.789Z')]],
  ['nulls', [null, new Date(1_000), null]],
];

for (const [name, values] of TIMESTAMPS) {
  test(`timestamptz[]: ${name}`, async () => {
    await check('timestamptz[]', timestampArray(values), values, values);
    const millis = values.map((v) => (v === null ? null : v.getTime()));
    assert.deepEqual(await roundTrip('timestamptz[]', timestampArray(millis)), values, 'epoch milliseconds');
  });
}

test('timestamptz[]: the first and the last year Postgres reads in ISO form', async () => {
  // Not compared with pg: its local-time text drops the seconds of a local mean time offset
  // (year 1 in Europe/Prague comes back 44 s off).
  const values = [new Date('0001-01-01T00:00:00.000Z'), new Date('9999-12-31T23:59:59.999Z')];
  assert.deepEqual(await roundTrip('timestamptz[]', timestampArray(values)), values);
});

test('timestamptz[]: random instants between 1900 and 2100, several on one day', async () => {
  let seed = 777;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const from = Date.UTC(1900, 0, 1);
  const span = Date.UTC(2100, 0, 1) - from;
  const values = Array.from({ length: 300 }, (_, i) =>
    new Date(i % 3 === 0 ? Date.UTC(2026, 4, 17) + Math.floor(next() * 86_400_000) : from + Math.floor(next() * span)));
  await check('timestamptz[]', timestampArray(values), values, values);
});

test('random strings of the characters an array literal treats specially', async () => {
  const alphabet = ['"', '\\', ',', '{', '}', ' ', '\t', '\n', 'N', 'U', 'L', 'a', 'é', '😀', "'", '(', ')'];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const values = Array.from({ length: 500 }, () =>
    next() < 0.05 ? null : Array.from({ length: Math.floor(next() * 12) }, () => alphabet[Math.floor(next() * alphabet.length)]!).join(''));
  await check('text[]', textArray(values), values, values);
});

test('arrayRows reads parallel arrays row by row, in array order, as the batch statements use them', async () => {
  const ids = [1, 2, Number.MAX_SAFE_INTEGER];
  const texts = ['a,b', null, 'NULL'];
  const flags = [true, null, false];
  const times = [new Date(-86_400_001), null, new Date(1_712_345_678_901)];
  const rowsOf = arrayRows({ id: '$1::bigint[]', t: '$2::text[]', f: '$3::boolean[]', at: '$4::timestamptz[]' });
  const { rows } = await client.query(
    `SELECT u.id::text AS id, u.t, u.f, u.at FROM ${rowsOf} AS u`,
    [numberArray(ids), textArray(texts), boolArray(flags), timestampArray(times)],
  );
  assert.deepEqual(rows, ids.map((id, i) => ({ id: String(id), t: texts[i], f: flags[i], at: times[i] })));
  // A long batch keeps its order through a filter, as the dispatch's events do.
  const many = Array.from({ length: 2_000 }, (_, i) => 2_000 - i);
  const { rows: kept } = await client.query<{ id: number }>(
    `SELECT u.id::int AS id FROM ${arrayRows({ id: '$1::bigint[]' })} AS u WHERE u.id = ANY(ARRAY(SELECT g FROM generate_series(1, 2000, 3) g))`,
    [numberArray(many)],
  );
  assert.deepEqual(kept.map((r) => r.id), many.filter((id) => id % 3 === 1));
});

test('arrayRows: a shorter array gives NULLs (as unnest of several arrays does); empty arrays give no rows', async () => {
  const rowsOf = arrayRows({ a: '$1::int[]', b: '$2::text[]' });
  const { rows } = await client.query(`SELECT u.a, u.b FROM ${rowsOf} AS u`, ['{1,2,3}', '{x}']);
  assert.deepEqual(rows, [{ a: 1, b: 'x' }, { a: 2, b: null }, { a: 3, b: null }]);
  const { rows: none } = await client.query(`SELECT u.a, u.b FROM ${rowsOf} AS u`, ['{}', '{}']);
  assert.deepEqual(none, []);
  assert.throws(() => arrayRows({}), /at least one column/);
});

test('arrayRows plans as a ProjectSet that streams its rows, not a function scan materialised first', async () => {
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE array_rows_plan(bigint[], text[]) AS
      SELECT u.id, u.t FROM ${arrayRows({ id: '$1::bigint[]', t: '$2::text[]' })} AS u`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE array_rows_plan('{1}', '{a}')`);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    assert.match(plan, /ProjectSet/);
    assert.doesNotMatch(plan, /Function Scan/);
  } finally {
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE ALL');
  }
});

test('event bodies travel as one Buffer of UTF-8 and split into their texts in Postgres, as eventsCtes splits them', async () => {
  const bodies: OutboxEvent['body'][] = [
    new SentMessageBody({
      requestId: 'req', publicId: 'pub-1', channel: 'sms', payload: '{"note": "Příliš žluťoučký kůň 😀"}', phone: '+420777123456',
      state: 'sent', resultInfo: 'Sent \u2028 "quoted" \\ \u0001 \ud800', at: 1_764_117_600_123, sender: 'Shop ž', country: 230, operator: 0,
      priceCzk: 0.9, priceEur: 0.036, count: 2, smsGateway: 'direct',
    }),
    { text: 'こんにちは', empty: '' },
    new RawJson('{"raw": [1, 2]}'),
  ];
  const param = eventParams(bodies.map((body) => ({ accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'sentMessage' as const, body }))).event_bodies;
  assert.ok(Buffer.isBuffer(param));
  const { rows } = await client.query<{ body: string; valid: boolean }>(
    `SELECT b.body, b.body::json IS NOT NULL AS valid FROM unnest(string_to_array($1::text, chr(1))) WITH ORDINALITY AS b(body, n) ORDER BY n`,
    [param],
  );
  const expected = bodies.map((b) => (b instanceof SentMessageBody ? sentMessageText(b.facts) : b instanceof RawJson ? b.text : stringifyEvent(b)));
  assert.deepEqual(rows, expected.map((body) => ({ body, valid: true })));
});

test('a borrowed bodies buffer handed to an idle client is copied by pg before query returns', async () => {
  const event = (text: string) => ({ accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'incomingMessage' as const, body: { text } });
  const pending = client.query<{ body: string }>(
    'SELECT b.body FROM unnest(string_to_array($1::text, chr(1))) WITH ORDINALITY AS b(body, n) ORDER BY n',
    [eventParams([event('lent'), event('ž')], 'borrow').event_bodies],
  );
  eventParams([event('written over before the answer came')], 'borrow'); // reuses the same memory at once
  const { rows } = await pending;
  assert.deepEqual(rows.map((r) => r.body), ['{"text":"lent"}', '{"text":"ž"}']);
});
