import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PayerSums, type Payer } from '../../shared/domain/payer.js';

const account: Payer = { kind: 'account', id: 7, currency: 'CZK' };
const accountEur: Payer = { kind: 'account', id: 7, currency: 'EUR' };
const subKey: Payer = { kind: 'key', id: 3, currency: 'CZK' };
const otherAccount: Payer = { kind: 'account', id: 12, currency: 'CZK' };

// Every transaction that changes several balances changes them in this order, so a dispatch's
// debits and a status batch's refunds (or two of either) lock the same rows alike.
const table: Array<{ name: string; adds: Array<[Payer, number]>; want: Array<[string, number]> }> = [
  { name: 'one payer, summed', adds: [[account, 5], [account, 7]], want: [['account.7.CZK', 12]] },
  {
    name: 'key order, whatever the order of adds',
    adds: [[subKey, 1], [otherAccount, 2], [account, 3]],
    want: [['account.12.CZK', 2], ['account.7.CZK', 3], ['key.3.CZK', 1]],
  },
  {
    name: 'the reverse order of adds gives the same order',
    adds: [[account, 3], [otherAccount, 2], [subKey, 1]],
    want: [['account.12.CZK', 2], ['account.7.CZK', 3], ['key.3.CZK', 1]],
  },
  { name: 'one account in two currencies: two payers', adds: [[accountEur, 4], [account, 6]], want: [['account.7.CZK', 6], ['account.7.EUR', 4]] },
  { name: 'nothing added', adds: [], want: [] },
];

for (const row of table) {
  test(`PayerSums: ${row.name}`, () => {
    const sums = new PayerSums();
    for (const [payer, units] of row.adds) sums.add(payer, units);
    assert.deepEqual(sums.inOrder().map((s) => [`${s.payer.kind}.${s.payer.id}.${s.payer.currency}`, s.units]), row.want);
  });
}
