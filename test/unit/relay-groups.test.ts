import { test } from 'node:test';
import assert from 'node:assert/strict';
import { groupByReceiver, type EventRef } from '../../shared/webhooks/relay.js';

const event = (id: number, keyId: number | null, url: string): EventRef => ({ id, account_id: 1, key_id: keyId, callback_url: url, created_ms: 0 });

test('a pass groups its events by key and callback URL, keeping id order within each group', () => {
  const table: Array<{ name: string; rows: EventRef[]; groups: Array<[string, number[]]> }> = [
    { name: 'nothing', rows: [], groups: [] },
    { name: 'one receiver', rows: [event(1, 7, 'http://a/'), event(2, 7, 'http://a/')], groups: [['7 http://a/', [1, 2]]] },
    {
      name: 'interleaved receivers join their earlier lists',
      rows: [event(1, 7, 'http://a/'), event(2, 8, 'http://a/'), event(3, 7, 'http://a/'), event(4, 7, 'http://b/'), event(5, 8, 'http://a/')],
      groups: [['7 http://a/', [1, 3]], ['8 http://a/', [2, 5]], ['7 http://b/', [4]]],
    },
    {
      name: 'events of no key are a group of their own per URL',
      rows: [event(1, null, 'http://a/'), event(2, null, 'http://a/'), event(3, 1, 'http://a/'), event(4, null, 'http://a/')],
      groups: [['none http://a/', [1, 2, 4]], ['1 http://a/', [3]]],
    },
    {
      // Equal URLs read from different rows are different string objects: compared by content.
      name: 'URLs equal by content',
      rows: [event(1, 3, ['http://', 'c/'].join('')), event(2, 3, 'http://c/')],
      groups: [['3 http://c/', [1, 2]]],
    },
  ];
  for (const { name, rows, groups } of table) {
    const got = [...groupByReceiver(rows)].map(([key, list]) => [key, list.map((e) => e.id)]);
    assert.deepEqual(got, groups, name);
  }
});
