/** `changeCreditStatement`: the balance change that travels with a COMMIT is written exactly. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { changeCreditStatement } from '../../shared/domain/accounts.js';

test('amounts are written exactly from ten-thousandths, debits negative', () => {
  const cases: Array<[Parameters<typeof changeCreditStatement>, string]> = [
    [['account', 7, 'CZK', -9000], "SELECT change_credit('account', 7, 'CZK', -0.9000)"],
    [['account', 7, 'EUR', -3], "SELECT change_credit('account', 7, 'EUR', -0.0003)"],
    [['key', 12, 'EUR', 1_234_567], "SELECT change_credit('key', 12, 'EUR', 123.4567)"],
    [['account', 1, 'CZK', -900_000_000_000], "SELECT change_credit('account', 1, 'CZK', -90000000.0000)"],
    [['key', 3, 'CZK', 0], "SELECT change_credit('key', 3, 'CZK', 0.0000)"],
  ];
  for (const [args, sql] of cases) {
    assert.equal(changeCreditStatement(...args), sql);
  }
});

test('anything that is not a row id, a whole amount or a known payer/currency is refused', () => {
  assert.throws(() => changeCreditStatement('account', 0, 'CZK', -1), /row id/);
  assert.throws(() => changeCreditStatement('account', 1.5, 'CZK', -1), /row id/);
  assert.throws(() => changeCreditStatement('account', 1, 'CZK', -0.5), /ten-thousandths/);
  assert.throws(() => changeCreditStatement('account', 1, 'CZK', Number.NaN), /ten-thousandths/);
  assert.throws(() => changeCreditStatement("account'; DROP TABLE accounts; --" as 'account', 1, 'CZK', -1), /unknown payer/);
  assert.throws(() => changeCreditStatement('account', 1, 'USD' as 'CZK', -1), /unknown payer/);
});
