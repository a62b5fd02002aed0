/**
 * normalizePhone's fast path must give exactly the results of the
 * libphonenumber-based implementation it replaced, for every input. That
 * implementation is frozen below as `referenceNormalizePhone` (a copy of
 * shared/phone/normalize.ts at commit 6655691, before the fast path, comments
 * trimmed), and both are compared over a deterministic generated corpus of
 * about a million inputs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  Metadata,
  isSupportedCountry,
  parsePhoneNumberFromString,
  type CountryCode as LibCountryCode,
  type MetadataJson,
  type PhoneNumber,
} from 'libphonenumber-js/core';
import examplesJson from 'libphonenumber-js/examples.mobile.json';
import metadataJson from 'libphonenumber-js/min/metadata';

import { normalizePhone } from '../../shared/phone/normalize.js';
import { seededRng } from '../support/prng.js';

// ---------------------------------------------------------------- reference (frozen)

const MAX_INPUT_LENGTH = 128;
const MAX_DIGITS = 20;
const NON_DIGITS = /\D+/g;
const ALL_DIGITS = /^\d+$/;

const FAST_METADATA: MetadataJson = {
  ...metadataJson,
  country_calling_codes: Object.fromEntries(
    Object.entries(metadataJson.country_calling_codes as Record<string, string[]>).map(
      ([cc, countries]) => [cc, countries.slice(0, 1)],
    ),
  ) as MetadataJson['country_calling_codes'],
};
const COUNTRIES_BY_CALLING_CODE: ReadonlyMap<string, readonly string[]> = new Map(
  Object.entries(metadataJson.country_calling_codes as Record<string, string[]>),
);
const CALLING_CODES: ReadonlySet<string> = new Set([
  ...COUNTRIES_BY_CALLING_CODE.keys(),
  ...Object.keys(metadataJson.nonGeographic ?? {}),
]);

function accountCountryOf(country: string): LibCountryCode | null {
  if (typeof country !== 'string' || country.length !== 2) return null;
  const up = country.toUpperCase() as LibCountryCode;
  return isSupportedCountry(up, metadataJson) ? up : null;
}

function e164(pn: PhoneNumber): string {
  return pn.number.slice(1);
}

function referenceCallingCodeOf(digits: string): string | null {
  if (typeof digits !== 'string') return null;
  const d = digits.charCodeAt(0) === 43 ? digits.slice(1) : digits;
  if (d.length < 2 || !ALL_DIGITS.test(d)) return null;
  for (let len = 1; len <= 3 && len < d.length; len++) {
    const cc = d.slice(0, len);
    if (CALLING_CODES.has(cc)) return cc;
  }
  return null;
}

function readInternational(digits: string): PhoneNumber | null {
  if (referenceCallingCodeOf(digits) === null) return null;
  const pn = parsePhoneNumberFromString('+' + digits, FAST_METADATA);
  return pn !== undefined && pn.isPossible() ? pn : null;
}

interface NumberingPlanInternals {
  numberingPlan?: { nationalNumberPattern(): string; nationalPrefix(): string | undefined };
}
interface PlanFacts {
  shape: RegExp | null;
  hasTrunkPrefix: boolean;
}
const NO_FACTS: PlanFacts = { shape: null, hasTrunkPrefix: false };
const planCache = new Map<string, PlanFacts>();

function planFacts(planKey: string): PlanFacts {
  const cached = planCache.get(planKey);
  if (cached !== undefined) return cached;
  let facts = NO_FACTS;
  try {
    const md = new Metadata(metadataJson);
    md.selectNumberingPlan(planKey as LibCountryCode);
    const plan = (md as unknown as NumberingPlanInternals).numberingPlan;
    if (plan) {
      const pattern = plan.nationalNumberPattern();
      facts = {
        shape: pattern ? new RegExp(`^(?:${pattern})$`) : null,
        hasTrunkPrefix: Boolean(plan.nationalPrefix()),
      };
    }
  } catch {
    facts = NO_FACTS;
  }
  planCache.set(planKey, facts);
  return facts;
}

function hasShape(pn: PhoneNumber): boolean {
  const re = planFacts(pn.country ?? pn.countryCallingCode).shape;
  return re === null || re.test(pn.nationalNumber);
}

function referenceNormalizePhone(input: string, accountCountry: string): string | null {
  if (typeof input !== 'string') return null;
  const s = input.trim();
  if (s.length === 0 || s.length > MAX_INPUT_LENGTH) return null;

  let digits = s.replace(NON_DIGITS, '');
  const plus = s.charCodeAt(0) === 43;
  const zeroZero = !plus && s.charCodeAt(0) === 48 && s.charCodeAt(1) === 48;
  if (zeroZero) digits = digits.slice(2);
  if (digits.length === 0 || digits.length > MAX_DIGITS) return null;

  if (plus || zeroZero) {
    const pn = readInternational(digits);
    return pn === null ? null : e164(pn);
  }

  const country = accountCountryOf(accountCountry);
  if (country !== null) {
    const national = parsePhoneNumberFromString(digits, { defaultCountry: country, extract: false }, FAST_METADATA);
    if (national !== undefined && national.isPossible()) {
      if (hasShape(national)) {
        if (
          national.nationalNumber === digits &&
          digits.startsWith(national.countryCallingCode) &&
          planFacts(country).hasTrunkPrefix
        ) {
          const intl = readInternational(digits);
          if (intl !== null && intl.countryCallingCode === national.countryCallingCode && hasShape(intl)) {
            return e164(intl);
          }
        }
        return e164(national);
      }
      const intl = readInternational(digits);
      return e164(intl !== null && hasShape(intl) ? intl : national);
    }
  }
  const intl = readInternational(digits);
  return intl === null ? null : e164(intl);
}

// ---------------------------------------------------------------- corpus

const prng = seededRng;

function randomDigits(rand: () => number, length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += String.fromCharCode(48 + Math.floor(rand() * 10));
  return s;
}

interface PlanInfo {
  callingCode: string;
  nationalPrefix: string;
}

function planInfo(country: string): PlanInfo {
  const row = (metadataJson.countries as Record<string, unknown[]>)[country];
  assert.ok(row, country);
  // min metadata rows: [calling code, IDD, pattern, lengths, formats, national prefix, …]
  return { callingCode: String(row[0]), nationalPrefix: typeof row[5] === 'string' ? row[5] : '' };
}

/**
 * International call prefixes as typed in the account countries below
 * (00, NANP, RU/KZ, AU, BR/CO with carrier selection, JP, MX, CN).
 */
const IDD_SPELLINGS = ['00', '011', '810', '0011', '0015', '0044', '010', '009', '005', '1795500'];

const EXAMPLES = examplesJson as Record<string, string>;
const ALL_CALLING_CODES = [...CALLING_CODES];
const COUNTRIES = Object.keys(metadataJson.countries);

/** Digit strings that do not depend on the account country. */
function globalDigitStrings(): string[] {
  const rand = prng(0x5eed01);
  const out: string[] = [];
  for (const cc of ALL_CALLING_CODES) {
    const mainCountry = COUNTRIES_BY_CALLING_CODE.get(cc)?.[0];
    const example = (mainCountry !== undefined ? EXAMPLES[mainCountry] : undefined) ?? '';
    for (let tail = 0; cc.length + tail <= MAX_DIGITS + 1; tail++) {
      out.push(cc + randomDigits(rand, tail));
      if (tail > 0) out.push(cc + '0' + randomDigits(rand, tail - 1));
      if (tail > 1) out.push(cc + example.slice(0, 2) + randomDigits(rand, tail - 2));
    }
  }
  for (const country of COUNTRIES) {
    const example = EXAMPLES[country];
    if (example === undefined) continue;
    const { callingCode, nationalPrefix } = planInfo(country);
    const variants = [
      example,
      example.slice(0, -1),
      example + randomDigits(rand, 1),
      example.slice(0, -3) + randomDigits(rand, 3),
      example.slice(0, -4) + randomDigits(rand, 5),
    ];
    for (const v of variants) {
      out.push(v, callingCode + v, nationalPrefix + v, callingCode + nationalPrefix + v, '0' + v, '1' + v, '8' + v);
    }
    for (let length = 3; length <= 16; length++) {
      out.push(example.slice(0, 2) + randomDigits(rand, length - 2));
      if (length % 2 === 0) out.push(callingCode + example.slice(0, 1) + randomDigits(rand, length - 1));
    }
  }
  for (let length = 1; length <= MAX_DIGITS + 1; length++) {
    for (let i = 0; i < 100; i++) out.push(randomDigits(rand, length));
  }
  return [...new Set(out)];
}

/** Digit strings built around one account country's own plan. */
function accountDigitStrings(country: string, seed: number): string[] {
  const rand = prng(seed);
  const out: string[] = [];
  const { callingCode, nationalPrefix } = planInfo(country);
  const example = EXAMPLES[country] ?? '';
  const heads = [
    callingCode,
    nationalPrefix,
    callingCode + nationalPrefix,
    nationalPrefix + callingCode,
    '0',
    '00',
    '000',
    callingCode + '0',
    example.slice(0, 1),
    example.slice(0, 3),
    callingCode + example.slice(0, 3),
    nationalPrefix + example.slice(0, 3),
    ...IDD_SPELLINGS.flatMap((p) => [p, p + callingCode, p + '44', p + '1', p + '0']),
  ];
  for (const head of new Set(heads)) {
    for (let length = Math.max(1, head.length); length <= MAX_DIGITS + 1; length++) {
      for (let i = 0; i < 10; i++) out.push(head + randomDigits(rand, length - head.length));
    }
  }
  // every two-digit start after the calling code / trunk prefix, one number of each length
  for (const head of new Set([callingCode, nationalPrefix, callingCode + nationalPrefix, ''])) {
    for (let d = 0; d < 100; d++) {
      const start = head + String(d).padStart(2, '0');
      for (let length = start.length; length <= MAX_DIGITS; length++) {
        out.push(start + randomDigits(rand, length - start.length));
      }
    }
  }
  if (callingCode === '1') {
    // every NANP area code, with and without the trunk prefix
    for (let area = 200; area <= 999; area++) {
      const local = randomDigits(rand, 7);
      out.push(`${area}${local}`, `1${area}${local}`, `011${area}${local}`, `${area}${local.slice(0, 6)}`);
    }
  }
  return [...new Set(out)];
}

function formatted(rand: () => number, digits: string): string {
  const style = Math.floor(rand() * 8);
  const groups = digits.replace(/(\d{3})(?=\d)/g, '$1 ');
  switch (style) {
    case 0:
      return groups;
    case 1:
      return digits.replace(/(\d{2})(?=\d)/g, '$1-');
    case 2:
      return `(${digits.slice(0, 3)}) ${digits.slice(3)}`;
    case 3:
      return ` \t${digits}\n`;
    case 4:
      return `+${groups}`;
    case 5:
      return `00 ${groups}`;
    case 6:
      return `+ (0) ${digits}`;
    default:
      return `${digits.slice(0, 4)}.${digits.slice(4)} x`;
  }
}

// ---------------------------------------------------------------- comparison

interface Mismatch {
  input: string;
  country: string;
  expected: string | null;
  actual: string | null;
}

function compare(inputs: Iterable<string>, country: string, mismatches: Mismatch[]): number {
  let n = 0;
  for (const input of inputs) {
    n++;
    const expected = referenceNormalizePhone(input, country);
    const actual = normalizePhone(input, country);
    if (actual !== expected) mismatches.push({ input, country, expected, actual });
  }
  return n;
}

function assertNoMismatch(mismatches: readonly Mismatch[]): void {
  if (mismatches.length === 0) return;
  const shown = mismatches
    .slice(0, 50)
    .map((m) => `  ${JSON.stringify(m.input)} (${m.country}): reference ${m.expected}, normalizePhone ${m.actual}`);
  assert.fail(`${mismatches.length} mismatches:\n${shown.join('\n')}${mismatches.length > 50 ? '\n  …' : ''}`);
}

/** The account countries of most customers: half the global digit strings (alternating halves). */
const MAIN_ACCOUNT_COUNTRIES = [
  'CZ', 'SK', 'DE', 'GB', 'FR', 'US', 'CA', 'AT',
  'PL', 'IT', 'RU', 'IN', 'BR', 'CN', 'AE',
];
/**
 * Non-main members of shared calling codes (some with other lengths or national prefix rules than
 * the main country), carrier codes / transform rules, other trunk prefixes: a third of the global strings.
 */
const MORE_ACCOUNT_COUNTRIES = ['KZ', 'GG', 'IM', 'JM', 'AG', 'CX', 'TA', 'BQ', 'AR', 'MX', 'CO', 'AU', 'JP', 'HU'];
/** Account countries the rule treats as unknown, or normalises (case). */
const ODD_ACCOUNT_COUNTRIES = ['cz', 'gB', 'XX', '', 'CZE', '44', '1'];
const ACCOUNT_COUNTRIES = [...MAIN_ACCOUNT_COUNTRIES, ...MORE_ACCOUNT_COUNTRIES];

describe('normalizePhone fast path = libphonenumber reference', () => {
  const globalDigits = globalDigitStrings();
  const halves = [0, 1].map((half) => globalDigits.filter((_, i) => i % 2 === half));
  const everyThird = globalDigits.filter((_, i) => i % 3 === 0);
  const accountDigits = new Map(ACCOUNT_COUNTRIES.map((c, i) => [c, accountDigitStrings(c, 0xacc0 + i)]));
  let total = 0;

  for (const [i, country] of ACCOUNT_COUNTRIES.entries()) {
    it(`account ${country}: digits without + (national, trunk prefix, calling code, foreign, random)`, (t) => {
      const mismatches: Mismatch[] = [];
      const global = MAIN_ACCOUNT_COUNTRIES.includes(country) ? (halves[i % 2] ?? []) : everyThird;
      const n = compare(global, country, mismatches) + compare(accountDigits.get(country) ?? [], country, mismatches);
      total += n;
      t.diagnostic(`${n} cases`);
      assertNoMismatch(mismatches);
    });
  }

  it('international form (+ / 00)', (t) => {
    const mismatches: Mismatch[] = [];
    const accountSpecific = [...new Set([...accountDigits.values()].flat())].filter((_, i) => i % 3 === 0);
    const n =
      compare([...globalDigits, ...accountSpecific].map((d) => '+' + d), 'CZ', mismatches) +
      compare(everyThird.map((d) => '00' + d), 'DE', mismatches);
    total += n;
    t.diagnostic(`${n} cases`);
    assertNoMismatch(mismatches);
  });

  it('formatting characters, whitespace and odd account countries', (t) => {
    const rand = prng(0xf0f0);
    const mismatches: Mismatch[] = [];
    const sample = globalDigits.filter((_, i) => i % 10 === 0);
    let n = 0;
    for (const country of [...ACCOUNT_COUNTRIES, ...ODD_ACCOUNT_COUNTRIES]) {
      n += compare(sample.map((d) => formatted(rand, d)), country, mismatches);
    }
    for (const country of ODD_ACCOUNT_COUNTRIES) n += compare(sample, country, mismatches);
    const edges = ['', ' ', '+', '00', '0', '+0', '++420777123456', 'tel:+420777123456', '9'.repeat(129)];
    // non-ASCII digits are no digits to the rule
    n += compare([...edges, '+٤٢٠٧٧٧١٢٣٤٥٦', '４２０７７７１２３４５６'], 'CZ', mismatches);
    total += n;
    t.diagnostic(`${n} cases`);
    assertNoMismatch(mismatches);
  });

  it('covers a corpus of several hundred thousand inputs', (t) => {
    t.diagnostic(`${total} cases in total`);
    assert.ok(total >= 300_000, `only ${total} cases`);
  });
});
