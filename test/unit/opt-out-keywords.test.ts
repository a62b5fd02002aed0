import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classifyKeyword, mayBeKeyword, normalizeKeyword, type KeywordKind, type KeywordLists } from '../../shared/suppression/keywords.js';

test('an inbound text is an opt-out or opt-in keyword only when it is the whole text, whatever its case, diacritics and punctuation', () => {
  const defaults: Array<[string, KeywordKind | null]> = [
    ['STOP', 'opt-out'], ['stop', 'opt-out'], ['Stop!', 'opt-out'], ['  stop.  ', 'opt-out'], ['"STOP"', 'opt-out'],
    ['STOPALL', 'opt-out'], ['Unsubscribe', 'opt-out'], ['cancel', 'opt-out'], ['End', 'opt-out'], ['quit', 'opt-out'],
    ['ODHLASIT', 'opt-out'], ['Odhlásit', 'opt-out'], ['odhlásit!', 'opt-out'], ['ODHLÁSIT', 'opt-out'],
    ['STOP SMS', 'opt-out'], ['stop  sms', 'opt-out'], ['Stop\tSMS', 'opt-out'], ['ｓｔｏｐ', 'opt-out'],
    ['START', 'opt-in'], ['start', 'opt-in'], ['Unstop', 'opt-in'], ['UNSTOP!', 'opt-in'],
    ['STOP please', null], ['please stop', null], ['STOPP', null], ['ST OP', null], ['STOP-SMS', null], ['', null], ['!!!', null],
    ['Restart', null], ['YES', null], ['stop\nthe presses', null], ['S'.repeat(300), null],
  ];
  for (const [text, expected] of defaults) {
    assert.equal(classifyKeyword(text), expected, JSON.stringify(text));
  }
});

test('an account\'s own keyword lists replace the defaults, and opt-out wins over opt-in', () => {
  const lists: KeywordLists = { optOut: ['Konec', 'nechci SMS'], optIn: ['Znovu'] };
  const table: Array<[string, KeywordLists, KeywordKind | null]> = [
    ['konec', lists, 'opt-out'], ['NECHCI sms', lists, 'opt-out'], ['Nechci  SMS.', lists, 'opt-out'],
    ['STOP', lists, null], ['znovu', lists, 'opt-in'], ['START', lists, null],
    ['STOP', { optOut: null, optIn: ['Znovu'] }, 'opt-out'], ['START', { optOut: ['Konec'], optIn: null }, 'opt-in'],
    ['both', { optOut: ['Both'], optIn: ['BOTH'] }, 'opt-out'],
    ['STOP', { optOut: [], optIn: [] }, null],
  ];
  for (const [text, l, expected] of table) {
    assert.equal(classifyKeyword(text, l), expected, `${text} ${JSON.stringify(l)}`);
  }
});

test('normalising removes diacritics, case, repeated spaces and punctuation at either end only', () => {
  assert.equal(normalizeKeyword(' Odhlásit  SMS! '), 'ODHLASIT SMS');
  assert.equal(normalizeKeyword('žluťoučký'), 'ZLUTOUCKY');
  assert.equal(normalizeKeyword('a-b'), 'A-B');
  assert.equal(mayBeKeyword('x'.repeat(64)), true);
  assert.equal(mayBeKeyword('x'.repeat(65)), false);
  assert.equal(mayBeKeyword(' ... '), false);
});
