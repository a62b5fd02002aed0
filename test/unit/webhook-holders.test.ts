/** Which webhook batch holders the recovery sweep counts as gone (shared/webhooks/holders.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goneHolders } from '../../shared/webhooks/holders.js';

/** A reader answering from one list of live ids per look, recording what it was asked. */
function looks(...answers: string[][]) {
  const asked: string[][] = [];
  const read = async (ids: string[]) => {
    asked.push(ids);
    const live = answers[asked.length - 1] ?? [];
    return new Set(ids.filter((id) => live.includes(id)));
  };
  return { read, asked };
}

test('goneHolders: a holder is gone when its key is missing at both looks', async () => {
  const cases: Array<{ name: string; holders: string[]; answers: string[][]; gone: string[]; looks: number }> = [
    { name: 'all alive: one look', holders: ['a', 'b'], answers: [['a', 'b']], gone: [], looks: 1 },
    { name: 'missing twice', holders: ['a', 'b'], answers: [['a'], ['a']], gone: ['b'], looks: 2 },
    { name: 'back at the second look (Redis lost the key)', holders: ['a', 'b'], answers: [['a'], ['b']], gone: [], looks: 2 },
    { name: 'several missing, one back', holders: ['a', 'b', 'c'], answers: [[], ['b']], gone: ['a', 'c'], looks: 2 },
    { name: 'no holders: no look', holders: [], answers: [], gone: [], looks: 0 },
  ];
  for (const c of cases) {
    const reader = looks(...c.answers);
    assert.deepEqual(await goneHolders(c.holders, reader.read, { confirmMs: 1 }), c.gone, c.name);
    assert.equal(reader.asked.length, c.looks, `${c.name}: looks`);
    if (c.looks === 2) assert.deepEqual(reader.asked[1], c.holders.filter((h) => !(c.answers[0] ?? []).includes(h)), `${c.name}: only the missing looked at again`);
  }
});

test('goneHolders: unreadable keys and a stop count nobody as gone', async () => {
  const errors: string[] = [];
  const failing = async () => { throw new Error('CLUSTERDOWN'); };
  assert.deepEqual(await goneHolders(['a'], failing, { confirmMs: 1, onError: (e) => errors.push(e.message) }), []);
  assert.deepEqual(errors, ['CLUSTERDOWN']);

  const stop = new AbortController();
  const reader = looks([], []);
  const pending = goneHolders(['a'], reader.read, { confirmMs: 60_000, signal: stop.signal, onError: (e) => errors.push(e.message) });
  stop.abort();
  assert.deepEqual(await pending, [], 'the wait ends at the stop, with nobody gone');
  assert.equal(reader.asked.length, 1);
  assert.deepEqual(errors, ['CLUSTERDOWN'], 'a stop is not an error');
});
