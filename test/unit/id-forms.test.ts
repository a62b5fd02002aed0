import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  addVote,
  decideRelation,
  noEvidence,
  openRelations,
  receiptReadings,
  receiptRefUnder,
  receiptVote,
  sameRef,
  type IdRelation,
} from '../../shared/carriers/smpp/id-forms.js';
import { normalizeMessageId, type MessageIdForm } from '../../shared/carriers/smpp/pdu.js';

describe('sameRef: the first key of normalizeMessageId, computed alone', () => {
  const ids = ['0000001A', '1a', '26', '0000000026', '0', '000', 'ABCDEF12', '36deb503-fc58-46d6-86de-000000000001', 'XYZ', ' 12\0\0', '', '12345678901234567890'];
  for (const form of ['auto', 'hex', 'dec', 'string'] as MessageIdForm[]) {
    for (const id of ids) {
      it(`${JSON.stringify(id)} (${form})`, () => assert.equal(sameRef(id, form), normalizeMessageId(id, form)[0] ?? ''));
    }
  }
});

describe('openRelations', () => {
  const cases: Array<[MessageIdForm, MessageIdForm, IdRelation[]]> = [
    ['auto', 'auto', ['same', 'hex-dec', 'dec-hex']],
    ['hex', 'auto', ['same', 'hex-dec']],
    ['dec', 'auto', ['same', 'dec-hex']],
    ['auto', 'hex', ['same', 'dec-hex']],
    ['auto', 'dec', ['same', 'hex-dec']],
    ['string', 'auto', ['same']],
    ['auto', 'string', ['same']],
    ['hex', 'dec', []], // both known: nothing to learn
    ['hex', 'hex', []],
  ];
  for (const [submit, receipt, expected] of cases) {
    it(`submit_id=${submit}, receipt_id=${receipt}`, () => assert.deepEqual(openRelations(submit, receipt), expected));
  }
});

describe('receiptRefUnder: a receipt under each relation names the ref its submit id was registered under', () => {
  // [submit id as the response wrote it, submit form, receipt id, relation]
  const cases: Array<[string, MessageIdForm, string, IdRelation]> = [
    ['0000001A', 'auto', '0000001a', 'same'],
    ['0000001A', 'auto', '1A', 'same'],
    ['26', 'auto', '0000000026', 'same'],
    ['36deb503-fc58-46d6-86de-000000000001', 'auto', '36DEB503-FC58-46D6-86DE-000000000001', 'same'],
    ['0000001A', 'auto', '26', 'hex-dec'],
    ['00000010', 'auto', '16', 'hex-dec'], // a hex id without letters
    ['26', 'auto', '1A', 'dec-hex'],
    ['16', 'auto', '10', 'dec-hex'],
    ['0000001A', 'hex', '26', 'hex-dec'], // explicit submit form: refs are values
    ['0000001A', 'hex', '1a', 'same'],
    ['26', 'dec', '1A', 'dec-hex'],
    ['26', 'dec', '026', 'same'],
  ];
  for (const [submitId, submitForm, receiptId, relation] of cases) {
    it(`${submitId} (${submitForm}) ← ${receiptId} (${relation})`, () => {
      const registered = normalizeMessageId(submitId, submitForm)[0];
      assert.equal(receiptRefUnder(receiptId, relation, submitForm), registered);
    });
  }
  it('an id that cannot be written that way has no reading', () => {
    assert.equal(receiptRefUnder('1A', 'hex-dec', 'auto'), null);
    assert.equal(receiptRefUnder('a-b', 'dec-hex', 'auto'), null);
    assert.equal(receiptRefUnder('  ', 'same', 'auto'), null);
  });
});

describe('receiptVote and decideRelation: the learning rule', () => {
  const open: IdRelation[] = ['same', 'hex-dec', 'dec-hex'];
  // A decimal SMSC (ids 100…): receipt 100 reads as hex:100 (same), hex:64 (hex-dec), hex:256 (dec-hex).
  const readings = receiptReadings('100', open, 'auto');
  it('readings of an all-digit id', () => {
    assert.deepEqual([...readings], [['same', 'hex:100'], ['hex-dec', 'hex:64'], ['dec-hex', 'hex:256']]);
  });

  const votes: Array<[what: string, id: string, registered: string[], expected: ReturnType<typeof receiptVote>]> = [
    ['one reading registered: a vote for it, against the others', '100', ['hex:100'], { for: ['same'], against: ['hex-dec', 'dec-hex'] }],
    ['another reading registered', '100', ['hex:64'], { for: ['hex-dec'], against: ['same', 'dec-hex'] }],
    ['two readings registered: ambiguous, no vote', '100', ['hex:100', 'hex:64'], null],
    ['none registered (not indexed yet, or lost): no vote', '100', [], null],
    ['readings that all agree carry no information', '7', ['hex:7'], null],
    ['an opaque id has one reading', 'ab-cd', ['str:ab-cd'], null],
    ['an id with letters has no decimal reading', '1A', ['hex:1a'], { for: ['same'], against: ['dec-hex'] }],
  ];
  for (const [what, id, registered, expected] of votes) {
    it(what, () => assert.deepEqual(receiptVote(receiptReadings(id, open, 'auto'), new Set(registered)), expected));
  }

  const decisions: Array<[what: string, votes: Array<[IdRelation[], IdRelation[]]>, expected: IdRelation | null]> = [
    ['no votes', [], null],
    ['two votes are not enough', [[['same'], ['hex-dec', 'dec-hex']], [['same'], ['hex-dec']]], null],
    ['three unanimous votes decide', Array.from({ length: 3 }, () => [['same'], ['hex-dec', 'dec-hex']] as [IdRelation[], IdRelation[]]), 'same'],
    ['a stray vote against needs 16 more for', [
      ...Array.from({ length: 18 }, () => [['hex-dec'], ['same']] as [IdRelation[], IdRelation[]]),
      [['same'], ['hex-dec']],
    ], null],
    ['… and decides with them', [
      ...Array.from({ length: 19 }, () => [['hex-dec'], ['same']] as [IdRelation[], IdRelation[]]),
      [['same'], ['hex-dec']],
    ], 'hex-dec'],
    ['two relations never told apart: undecided', Array.from({ length: 5 }, () => [['same', 'dec-hex'], ['hex-dec']] as [IdRelation[], IdRelation[]]), null],
    ['told apart later', [
      ...Array.from({ length: 5 }, () => [['same', 'dec-hex'], ['hex-dec']] as [IdRelation[], IdRelation[]]),
      [['same'], ['dec-hex']],
    ], 'same'],
  ];
  for (const [what, list, expected] of decisions) {
    it(what, () => {
      const evidence = noEvidence();
      for (const [f, a] of list) addVote(evidence, { for: f, against: a });
      assert.equal(decideRelation(evidence, open), expected);
    });
  }
  it('only an open relation is decided', () => {
    const evidence = noEvidence();
    for (let i = 0; i < 5; i++) addVote(evidence, { for: ['dec-hex'], against: ['same'] });
    assert.equal(decideRelation(evidence, ['same', 'hex-dec']), null);
  });
});
