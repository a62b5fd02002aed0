import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { getCountries } from 'libphonenumber-js/min';

import { MCC_BY_COUNTRY, mccOfCountry, mccOfE164 } from '../../shared/phone/mcc.js';
import {
  callingCodeOf,
  countryOfE164,
  isValidCountry,
  normalizePhone,
} from '../../shared/phone/normalize.js';

type Row = readonly [input: string, country: string, expected: string | null];

function table(rows: readonly Row[]): void {
  for (const [input, country, expected] of rows) {
    it(`${JSON.stringify(input.length > 40 ? input.slice(0, 40) + '…' : input)} (${country}) → ${expected}`, () => {
      assert.equal(normalizePhone(input, country), expected);
    });
  }
}

// ---------------------------------------------------------------- normalizePhone

describe('normalizePhone: rule D2 examples', () => {
  table([
    ['+420 777 123 456', 'CZ', '420777123456'],
    ['00420777123456', 'CZ', '420777123456'],
    ['777123456', 'CZ', '420777123456'],
    ['420777123456', 'CZ', '420777123456'],
    ['07911 123456', 'GB', '447911123456'],
    ['030 1234567', 'DE', '49301234567'],
    ['+1 (415) 555-0123', 'CZ', '14155550123'],
    ['447911123456', 'CZ', '447911123456'],
    ['12', 'CZ', null],
    ['abc', 'CZ', null],
    ['+999123', 'CZ', null],
    ['9'.repeat(300), 'CZ', null],
    ['+420 777 123 456 ' + 'x'.repeat(500), 'CZ', null],
    ['1234567890123456789012', 'CZ', null],
  ]);

  it('the sandbox test number 420777777777 normalises to itself', () => {
    assert.equal(normalizePhone('420777777777', 'CZ'), '420777777777');
    assert.equal(normalizePhone('+420777777777', 'CZ'), '420777777777');
    assert.equal(normalizePhone('777777777', 'CZ'), '420777777777');
    // also from accounts in other countries (not possible nationally there)
    assert.equal(normalizePhone('420777777777', 'US'), '420777777777');
    assert.equal(normalizePhone('+420777777777', 'DE'), '420777777777');
  });

  // CZ has no trunk prefix, so the leading 0 is not stripped. The 10 remaining
  // digits are a *possible* CZ length (CZ allows 9–12 because of 9xx service
  // ranges) and not possible as international, so by D2 the national reading
  // stands. Documented in shared/phone/normalize.ts.
  it('CZ 0777123456: no trunk prefix to strip → read as a 10-digit CZ number', () => {
    assert.equal(normalizePhone('0777123456', 'CZ'), '4200777123456');
    assert.notEqual(normalizePhone('0777123456', 'CZ'), '420777123456');
  });
});

describe('normalizePhone: international form', () => {
  table([
    ['  +420777123456  ', 'CZ', '420777123456'],
    ['\t00 420 777 123 456\n', 'CZ', '420777123456'],
    ['+44 (0) 7911 123456', 'CZ', '447911123456'], // national prefix inside international form
    ['+44 07911 123456', 'US', '447911123456'],
    ['+49 30 1234567', 'CZ', '49301234567'],
    ['+1-415-555-0123', 'DE', '14155550123'],
    ['0014155550123', 'CZ', '14155550123'],
    ['+421 905 123 456', 'CZ', '421905123456'],
    ['+800 1234 5678', 'CZ', '80012345678'], // non-geographic (UIFN)
    ['+', 'CZ', null],
    ['00', 'CZ', null],
    ['+0777123456', 'CZ', null],
    ['+420 12', 'CZ', null],
    ['+4207771234567890', 'CZ', null], // too long
    // `+`/`00` force international even where a national reading would be possible
    ['302101234567', 'DE', '49302101234567'], // (without: a possible DE national number)
    ['+302101234567', 'DE', '302101234567'],
    ['00302101234567', 'DE', '302101234567'],
  ]);
});

describe('normalizePhone: account-country reading', () => {
  table([
    // national form with / without trunk prefix
    ['0301234567', 'DE', '49301234567'],
    ['301234567', 'DE', '49301234567'],
    ['0151 12345678', 'DE', '4915112345678'],
    ['7911 123456', 'GB', '447911123456'],
    ['(415) 555-0123', 'US', '14155550123'],
    ['415.555.0123', 'US', '14155550123'],
    ['1 415 555 0123', 'US', '14155550123'],
    ['06 12 34 56 78', 'FR', '33612345678'],
    ['0905 123 456', 'SK', '421905123456'],
    ['905123456', 'SK', '421905123456'],
    ['312 345 6789', 'IT', '393123456789'],
    ['06 6982 1234', 'IT', '390669821234'], // Italian leading 0 is part of the number
    // already starting with the account country's calling code
    ['447911123456', 'GB', '447911123456'],
    ['4930 1234567', 'DE', '49301234567'],
    ['491701234567', 'DE', '491701234567'], // calling-code reading wins in a trunk-prefix country
    ['14155550123', 'US', '14155550123'],
    ['33612345678', 'FR', '33612345678'],
    ['436641234567', 'AT', '436641234567'],
    // a national number that merely starts with the calling code digits stays national
    ['3911234567', 'IT', '393911234567'],
    // the account country's own international call prefix
    ['011 44 7911 123456', 'US', '447911123456'],
    // account country is case-insensitive; unknown → international reading only
    ['777123456', 'cz', '420777123456'],
    ['420777123456', 'XX', '420777123456'],
    ['777123456', 'XX', null],
    ['777123456', '', null],
  ]);
});

describe('normalizePhone: international without plus from another country', () => {
  table([
    ['447911123456', 'CZ', '447911123456'],
    ['14155550123', 'CZ', '14155550123'],
    ['4915112345678', 'CZ', '4915112345678'],
    ['421905123456', 'CZ', '421905123456'],
    ['420777123456', 'GB', '420777123456'],
    ['420777123456', 'SK', '420777123456'],
    ['447911123456', 'US', '447911123456'],
  ]);
});

describe('normalizePhone: output shape', () => {
  const inputs: Row[] = [
    ['+420 777 123 456', 'CZ', null],
    ['07911 123456', 'GB', null],
    ['030 1234567', 'DE', null],
    ['+1 (415) 555-0123', 'US', null],
    ['447911123456', 'CZ', null],
  ];
  it('is E.164 digits without + (≤ 15 digits) and idempotent', () => {
    for (const [input, country] of inputs) {
      const out = normalizePhone(input, country);
      assert.ok(out !== null, input);
      assert.match(out, /^[1-9]\d{6,14}$/);
      assert.equal(normalizePhone('+' + out, country), out);
      assert.equal(normalizePhone(out, country), out);
    }
  });
});

// ---------------------------------------------------------------- helpers

describe('callingCodeOf', () => {
  const rows: ReadonlyArray<readonly [string, string | null]> = [
    ['420777123456', '420'],
    ['14155550123', '1'],
    ['447911123456', '44'],
    ['79161234567', '7'],
    ['4915112345678', '49'],
    ['80012345678', '800'],
    ['+420777123456', '420'],
    ['999123456', null],
    ['', null],
    ['4', null],
    ['42a777123456', null],
  ];
  for (const [digits, expected] of rows) {
    it(`${JSON.stringify(digits)} → ${expected}`, () => assert.equal(callingCodeOf(digits), expected));
  }
});

describe('countryOfE164', () => {
  const rows: ReadonlyArray<readonly [string, string | null]> = [
    ['420777123456', 'CZ'],
    ['421905123456', 'SK'],
    ['4915112345678', 'DE'],
    ['447400123456', 'GB'],
    ['447781123456', 'GG'],
    ['447797712345', 'JE'],
    ['14155550123', 'US'],
    ['15062345678', 'CA'],
    ['18762101234', 'JM'],
    ['17872345678', 'PR'],
    ['18002345678', 'US'], // toll-free, shared by all NANP → main country
    ['18001234567', 'DO'], // 800-1xx is no US toll-free number but DO's 8001 range
    ['79161234567', 'RU'],
    ['77710009998', 'KZ'],
    ['80012345678', null], // non-geographic
    ['999123456', null],
    ['abc', null],
  ];
  for (const [digits, expected] of rows) {
    it(`${digits} → ${expected}`, () => assert.equal(countryOfE164(digits), expected));
  }
});

describe('isValidCountry', () => {
  it('accepts ISO alpha-2 codes known to libphonenumber', () => {
    for (const c of ['CZ', 'SK', 'DE', 'GB', 'US', 'JP', 'XK', 'GG']) assert.equal(isValidCountry(c), true, c);
  });
  it('rejects unknown, lower-case and malformed codes', () => {
    for (const c of ['XX', 'UK', 'cz', 'CZE', 'C', '', '001', '42']) assert.equal(isValidCountry(c), false, c);
  });
});

// ---------------------------------------------------------------- MCC

describe('mccOfCountry', () => {
  const rows: ReadonlyArray<readonly [string, number]> = [
    // countries with several MCCs → the lowest
    ['US', 310], // 310–316
    ['IN', 404], // 404–406
    ['GB', 234], // 234–235
    ['JP', 440], // 440–441
    ['CN', 460], // 460–461
    ['AE', 424], // 424, 430, 431
    // single MCC
    ['CZ', 230], ['SK', 231], ['DE', 262], ['AT', 232], ['PL', 260], ['FR', 208],
    ['IT', 222], ['ES', 214], ['NL', 204], ['CH', 228], ['RU', 250], ['KZ', 401],
    ['UA', 255], ['TR', 286], ['CA', 302], ['MX', 334], ['BR', 724], ['AR', 722],
    ['AU', 505], ['NZ', 530], ['ZA', 655], ['NG', 621], ['EG', 602], ['KR', 450],
    ['SG', 525], ['IL', 425], ['SA', 420], ['XK', 221],
    // territories
    ['PR', 330], ['JM', 338], ['GP', 340], ['GG', 234], ['RE', 647], ['GL', 290],
    // case-insensitive; unknown → 0
    ['cz', 230], ['XX', 0], ['', 0], ['CZE', 0],
  ];
  for (const [iso2, mcc] of rows) {
    it(`${JSON.stringify(iso2)} → ${mcc}`, () => assert.equal(mccOfCountry(iso2), mcc));
  }
});

describe('MCC table', () => {
  it('covers every region libphonenumber knows (~245), with plausible MCCs', () => {
    const regions = getCountries();
    assert.ok(MCC_BY_COUNTRY.size >= 230, `size ${MCC_BY_COUNTRY.size}`);
    for (const c of regions) assert.ok(MCC_BY_COUNTRY.has(c), `missing ${c}`);
    for (const [c, mcc] of MCC_BY_COUNTRY) {
      assert.ok(isValidCountry(c), `unknown region ${c}`);
      assert.ok(Number.isInteger(mcc) && mcc >= 202 && mcc <= 999, `${c} ${mcc}`);
    }
  });

  it('maps distinct sovereign countries to distinct MCCs', () => {
    const sample = ['CZ', 'SK', 'DE', 'AT', 'PL', 'FR', 'GB', 'US', 'CA', 'IN', 'JP', 'CN', 'RU', 'KZ', 'BR'];
    const mccs = new Set(sample.map((c) => mccOfCountry(c)));
    assert.equal(mccs.size, sample.length);
  });
});

describe('mccOfE164', () => {
  const rows: ReadonlyArray<readonly [string, number, string]> = [
    ['420777123456', 230, 'CZ'],
    ['421905123456', 231, 'SK'],
    ['4915112345678', 262, 'DE'],
    ['436641234567', 232, 'AT'],
    ['48501234567', 260, 'PL'],
    ['33612345678', 208, 'FR'],
    ['447400123456', 234, 'GB'],
    ['447781123456', 234, 'GG'],
    ['919876543210', 404, 'IN'],
    ['819012345678', 440, 'JP'],
    ['79161234567', 250, 'RU'],
    ['77710009998', 401, 'KZ'],
    ['8613812345678', 460, 'CN'],
    // NANP: the actual country behind +1
    ['14155550123', 310, 'US'],
    ['12015550123', 310, 'US'],
    ['15062345678', 302, 'CA'],
    ['14165550123', 302, 'CA'],
    ['18762101234', 338, 'JM'],
    ['17872345678', 330, 'PR'],
    ['18092345678', 370, 'DO'],
    ['13406421234', 332, 'VI'],
    ['12423591234', 364, 'BS'],
    ['18682911234', 374, 'TT'],
    ['16713001234', 535, 'GU'],
    ['17215205678', 362, 'SX'],
    ['18002345678', 310, 'toll-free → US'],
  ];
  for (const [digits, mcc, label] of rows) {
    it(`${digits} (${label}) → ${mcc}`, () => assert.equal(mccOfE164(digits), mcc));
  }
  it('is 0 for non-geographic, unknown and malformed input', () => {
    assert.equal(mccOfE164('80012345678'), 0);
    assert.equal(mccOfE164('999123456'), 0);
    assert.equal(mccOfE164(''), 0);
    assert.equal(mccOfE164('not a number'), 0);
  });
  it('works on normalised output end to end', () => {
    assert.equal(mccOfE164(normalizePhone('07911 123456', 'GB') ?? ''), 234);
    assert.equal(mccOfE164(normalizePhone('(416) 555-0123', 'CA') ?? ''), 302);
    assert.equal(mccOfE164(normalizePhone('777 123 456', 'CZ') ?? ''), 230);
  });
});
