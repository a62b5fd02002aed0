/**
 * Phone number normalisation (product decision D2).
 *
 * Pure functions, no I/O; they run per recipient on the hot send path.
 *
 * Rule (D2):
 *  - Everything but digits is stripped. A leading `+` or `00` in the original
 *    string (after trimming whitespace) means international form.
 *  - Otherwise the digits are first read as a number of the account's country:
 *    national form with or without the country's trunk prefix, or already
 *    starting with that country's calling code. If that reading is not a
 *    possible number, the digits are read as international (calling code
 *    first). Possible in neither reading → invalid (null).
 *  - "Possible" is libphonenumber's length check (`isPossible()`), not its
 *    range/pattern validation (`isValid()`).
 *
 * Details / decisions:
 *  - Trunk prefix: only the trunk prefix the account country actually has in
 *    the metadata is stripped (libphonenumber's national-prefix handling: `0`
 *    for GB/DE/FR…, `1` for NANP, none for CZ/SK/…). There is no generic
 *    "drop a leading 0".
 *  - "Already starting with the country's calling code" is decided by
 *    libphonenumber's own heuristic for international numbers typed without
 *    `+` (strip the calling code when the whole digit string is too long or
 *    does not have the country's number shape while the rest does).
 *  - Ambiguities the rule does not order (both tie-breaks use the coarse
 *    number shape: the country's general national-number pattern, i.e.
 *    leading digits + length, not the per-type range tables):
 *    a) national form without trunk prefix vs. already starting with the
 *       calling code, when both fit (DE `491701234567`): in a country that HAS
 *       a trunk prefix, the calling-code reading wins if it is possible and
 *       shaped (national numbers there are normally written with the trunk
 *       prefix). Countries without a trunk prefix keep the national reading.
 *    b) national vs. international: some countries' possible lengths are
 *       wide (CZ allows 9–12 digits because of its 9xx service ranges), so
 *       a foreign number typed without `+` (e.g. `447911123456` on a CZ
 *       account) is length-possible in BOTH readings; the international
 *       reading wins when it has its country's shape and the national reading
 *       does not.
 *    Everywhere else D2 applies literally (possible = length only).
 *  - Consequence for CZ (no trunk prefix): `0777123456` is 10 digits, which is
 *    a possible CZ length and possible in no other reading, so by the rule it
 *    normalises to `4200777123456` (a number that will not be deliverable).
 *    It is NOT silently turned into `420777123456`.
 *  - Only `+` / a literal leading `00` force international form. The account
 *    country's own international call prefix (e.g. `011` on a US account) is
 *    recognised as well, because libphonenumber strips it during the
 *    national reading.
 *  - `accountCountry` is upper-cased; an unknown one skips the national
 *    reading (international only).
 *
 * Metadata bundle: `libphonenumber-js/min`. It has the same possible lengths,
 * national prefix rules and country-resolution data for shared calling codes
 * (+1, +7, +44, …) as `max`, and gives identical `isPossible()`/`country`
 * results (checked over every example number and a sweep of all NANP area
 * codes); `max` only adds the per-type validation data (`getType()`, type
 * specific lengths) that D2 deliberately does not use. It is about half the
 * size (83 KB vs 157 KB of JSON) and loads faster.
 *
 * Implementation: the rule is defined by what libphonenumber's parser does,
 * but going through its public API costs several µs per reading (option
 * object spreads, metadata wrappers and regexes built per call). The fast path
 * below repeats the parser's steps for a plain digit string on per-plan facts
 * compiled once (calling code, possible lengths, shape, national prefix for
 * parsing, IDD), mirroring libphonenumber 1.13.x: `extractCountryCallingCode`,
 * `extractCountryCallingCodeFromInternationalNumberWithoutPlusSign`,
 * `extractNationalNumber`, `checkNumberLength`. Where that mirror would need
 * more of the parser (an IDD prefix typed without `+`/`00`, national prefix
 * patterns that capture carrier codes or rewrite the number, a plan missing
 * some fact) it steps aside and the libphonenumber path decides. The two are
 * compared over a large generated corpus in test/unit/phone-fast-path.test.ts;
 * rerun it when upgrading libphonenumber-js.
 */
import {
  Metadata,
  isSupportedCountry,
  parsePhoneNumberFromString,
  type CountryCode as LibCountryCode,
  type MetadataJson,
  type PhoneNumber,
} from 'libphonenumber-js/core';
import metadataJson from 'libphonenumber-js/min/metadata';

/** ISO 3166-1 alpha-2, upper case (as known to libphonenumber, e.g. also `XK`, `AC`, `TA`). */
export type CountryCode = string;

/** Longest raw input accepted; real formatted numbers are far shorter. */
const MAX_INPUT_LENGTH = 128;
/** Longest digit string accepted (E.164 is ≤ 15 digits; national input may add a trunk/carrier prefix). */
const MAX_DIGITS = 20;

const NON_DIGITS = /\D+/g;
const ALL_DIGITS = /^\d+$/;
const ISO2 = /^[A-Z]{2}$/;

/**
 * The `min` metadata with every shared calling code (+1, +7, +44, …) mapped to
 * its main country only. Parsing then skips libphonenumber's exact-country
 * resolution (which tries the per-type patterns of up to 25 NANP regions and
 * costs 10–20 µs per number) — normalisation only needs the digits, and the
 * main country's possible lengths are a superset of every member's except
 * Canada's 7-digit local-only numbers (not E.164-reachable anyway).
 * `countryOfE164` uses the full metadata.
 */
const FAST_METADATA: MetadataJson = {
  ...metadataJson,
  country_calling_codes: Object.fromEntries(
    Object.entries(metadataJson.country_calling_codes as Record<string, string[]>).map(
      ([cc, countries]) => [cc, countries.slice(0, 1)],
    ),
  ) as MetadataJson['country_calling_codes'],
};

/** Calling code → countries sharing it, the "main" country first. */
const COUNTRIES_BY_CALLING_CODE: ReadonlyMap<string, readonly string[]> = new Map(
  Object.entries(metadataJson.country_calling_codes as Record<string, string[]>),
);
/** Every calling code known to the metadata, including non-geographic ones (800, 882, …). */
const CALLING_CODES: ReadonlySet<string> = new Set([
  ...COUNTRIES_BY_CALLING_CODE.keys(),
  ...Object.keys(metadataJson.nonGeographic ?? {}),
]);

export function isValidCountry(iso2: string): boolean {
  return typeof iso2 === 'string' && ISO2.test(iso2) && isSupportedCountry(iso2 as LibCountryCode, metadataJson);
}

/** Upper-cased, supported country, or null. */
function accountCountryOf(country: string): LibCountryCode | null {
  if (typeof country !== 'string' || country.length !== 2) return null;
  const up = country.toUpperCase() as LibCountryCode;
  return isSupportedCountry(up, metadataJson) ? up : null;
}

function e164(pn: PhoneNumber): string {
  // `number` is `+<calling code><national significant number>`.
  return pn.number.slice(1);
}

function readInternational(digits: string): PhoneNumber | null {
  // Cheap pre-check: libphonenumber reports an unknown calling code by throwing
  // (and catching) an error, which costs more than the whole parse.
  if (callingCodeOf(digits) === null) return null;
  const pn = parsePhoneNumberFromString('+' + digits, FAST_METADATA);
  return pn !== undefined && pn.isPossible() ? pn : null;
}

// --- numbering-plan facts (the tie-breaks described above) -----------------

interface NumberingPlanInternals {
  numberingPlan?: {
    callingCode(): string;
    IDDPrefix(): string | undefined;
    nationalNumberPattern(): string;
    possibleLengths(): number[] | undefined;
    nationalPrefix(): string | undefined;
    nationalPrefixForParsing(): string | undefined;
  };
}

interface PlanFacts {
  /** General national-number pattern (coarse shape: leading digits + length), anchored. */
  shape: RegExp | null;
  /** Whether the plan has a trunk (national) prefix, e.g. `0` for DE/GB. */
  hasTrunkPrefix: boolean;
}

const NO_FACTS: PlanFacts = { shape: null, hasTrunkPrefix: false };
const planCache = new Map<string, PlanFacts>();

/** Facts about a country's (or non-geographic calling code's) numbering plan, cached. */
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
  // Without a pattern we cannot tell; treat it as shaped so D2's order stands.
  return re === null || re.test(pn.nationalNumber);
}

// --- fast path (see the header) ---------------------------------------------

/** The fast path cannot decide; the libphonenumber path does. */
const UNDECIDED = Symbol('undecided');
type Undecided = typeof UNDECIDED;

/** libphonenumber's limits on a national significant number (MIN/MAX_LENGTH_FOR_NSN). */
const MIN_NSN = 2;
const MAX_NSN = 17;

interface FastPlan {
  callingCode: string;
  /** Same as `PlanFacts.shape`: libphonenumber's own prefix and calling-code decisions test this pattern too. */
  shape: RegExp;
  /** Possible lengths of the national significant number. */
  lengths: readonly number[];
  /** `national_prefix_for_parsing` (or else the national prefix), anchored; null when there is none. */
  prefixForParsing: RegExp | null;
  /**
   * Plan that applies once a number is attributed to the calling code: FAST_METADATA resolves a
   * shared code to its main country, so a CA reading is checked against US lengths and shape.
   * Null when this plan is that main plan itself.
   */
  main: FastPlan | null;
}

/** A country's plan, usable as the account country's. */
interface CountryPlan extends FastPlan {
  /** International call prefix, anchored (libphonenumber strips it when it starts the digits). */
  idd: RegExp;
  hasTrunkPrefix: boolean;
}

/** A reading whose national significant number is a possible length in `plan`. */
interface Reading {
  callingCode: string;
  nationalNumber: string;
  plan: FastPlan;
}

const countryPlans = new Map<string, CountryPlan | null>();
const callingCodePlans = new Map<string, FastPlan | null>();

/** Fast-path facts of a supported country, or null when some are missing. */
function countryPlan(country: LibCountryCode): CountryPlan | null {
  let plan = countryPlans.get(country);
  if (plan === undefined) {
    plan = buildCountryPlan(country);
    countryPlans.set(country, plan);
  }
  return plan;
}

/** Fast-path facts of the plan libphonenumber selects for a calling code (FAST_METADATA: its main country). */
function callingCodePlan(callingCode: string): FastPlan | null {
  let plan = callingCodePlans.get(callingCode);
  if (plan === undefined) {
    const main = COUNTRIES_BY_CALLING_CODE.get(callingCode)?.[0];
    plan = main !== undefined ? countryPlan(main as LibCountryCode) : buildFastPlan(callingCode, null);
    callingCodePlans.set(callingCode, plan);
  }
  return plan;
}

function numberingPlanOf(planKey: string): NumberingPlanInternals['numberingPlan'] {
  try {
    const md = new Metadata(metadataJson);
    md.selectNumberingPlan(planKey as LibCountryCode);
    return (md as unknown as NumberingPlanInternals).numberingPlan;
  } catch {
    return undefined;
  }
}

function buildFastPlan(planKey: string, main: FastPlan | null): FastPlan | null {
  const plan = numberingPlanOf(planKey);
  const shape = planFacts(planKey).shape;
  const lengths = plan?.possibleLengths();
  if (plan === undefined || shape === null || lengths === undefined || lengths.length === 0) return null;
  const prefixForParsing = plan.nationalPrefixForParsing();
  return {
    callingCode: plan.callingCode(),
    shape,
    lengths,
    prefixForParsing: prefixForParsing ? new RegExp(`^(?:${prefixForParsing})`) : null,
    main,
  };
}

function buildCountryPlan(country: LibCountryCode): CountryPlan | null {
  const plan = numberingPlanOf(country);
  const idd = plan?.IDDPrefix();
  const mainCountry = plan && COUNTRIES_BY_CALLING_CODE.get(plan.callingCode())?.[0];
  if (!idd || mainCountry === undefined) return null;
  let main: CountryPlan | null = null;
  if (mainCountry !== country) {
    main = countryPlan(mainCountry as LibCountryCode);
    if (main === null) return null;
  }
  const facts = buildFastPlan(country, main);
  return facts === null
    ? null
    : {
        ...facts,
        // libphonenumber tests `search(new RegExp(idd)) === 0`: a match starting at 0.
        idd: new RegExp(`^(?:${idd})`),
        hasTrunkPrefix: planFacts(country).hasTrunkPrefix,
      };
}

type LengthVerdict = 'IS_POSSIBLE' | 'TOO_SHORT' | 'TOO_LONG' | 'INVALID_LENGTH';

/** libphonenumber's checkNumberLength(). */
function lengthVerdict(plan: FastPlan, length: number): LengthVerdict {
  const { lengths } = plan;
  const min = lengths[0] ?? 0;
  if (length === min) return 'IS_POSSIBLE';
  if (length < min) return 'TOO_SHORT';
  if (length > (lengths[lengths.length - 1] ?? 0)) return 'TOO_LONG';
  return lengths.includes(length) ? 'IS_POSSIBLE' : 'INVALID_LENGTH';
}

function isPossibleNsn(nationalNumber: string, plan: FastPlan): boolean {
  const n = nationalNumber.length;
  return n >= MIN_NSN && n <= MAX_NSN && lengthVerdict(plan, n) === 'IS_POSSIBLE';
}

/**
 * libphonenumber's extractNationalNumber(): strip the national (trunk) prefix
 * unless the number loses its shape or is left with an impossible length.
 */
function stripNationalPrefix(number: string, plan: FastPlan): string | Undecided {
  const re = plan.prefixForParsing;
  if (re === null || number.length === 0) return number;
  const match = re.exec(number);
  if (match === null) return number;
  // A captured group means a carrier code and/or a transform rule rewriting the number.
  if (match.length > 1 && match[match.length - 1]) return UNDECIDED;
  const stripped = number.slice(match[0].length);
  if (stripped === number) return number;
  if (plan.shape.test(number) && !plan.shape.test(stripped)) return number;
  const verdict = lengthVerdict(plan.main ?? plan, stripped.length);
  return verdict === 'TOO_SHORT' || verdict === 'INVALID_LENGTH' ? number : stripped;
}

/** Counterpart of `readInternational`. */
function readInternationalFast(digits: string): Reading | null | Undecided {
  const callingCode = callingCodeOf(digits);
  if (callingCode === null) return null;
  const plan = callingCodePlan(callingCode);
  if (plan === null) return UNDECIDED;
  const nationalNumber = stripNationalPrefix(digits.slice(callingCode.length), plan);
  if (nationalNumber === UNDECIDED) return UNDECIDED;
  return isPossibleNsn(nationalNumber, plan) ? { callingCode, nationalNumber, plan } : null;
}

/** Counterpart of the national `parsePhoneNumberFromString(…).isPossible()` reading. */
function readNationalFast(digits: string, account: CountryPlan): Reading | null | Undecided {
  // The account country's IDD (US `011…`) turns the rest into an international number, with
  // checks of its own (no `0` after it, a known calling code): rare enough to leave to the parser.
  if (account.idd.test(digits)) return UNDECIDED;
  const main = account.main ?? account;
  let number = digits;
  let plan: FastPlan = account;
  if (digits.startsWith(account.callingCode)) {
    // libphonenumber's calling-code heuristic for numbers typed without `+`.
    const rest = digits.slice(account.callingCode.length);
    const restNumber = stripNationalPrefix(rest, account);
    const fullNumber = stripNationalPrefix(digits, account);
    if (restNumber === UNDECIDED || fullNumber === UNDECIDED) return UNDECIDED;
    if (
      (!account.shape.test(fullNumber) && account.shape.test(restNumber)) ||
      lengthVerdict(account, fullNumber.length) === 'TOO_LONG'
    ) {
      number = rest;
      plan = main;
    }
  }
  if (number.length === 0) return null;
  const nationalNumber = stripNationalPrefix(number, plan);
  if (nationalNumber === UNDECIDED) return UNDECIDED;
  return isPossibleNsn(nationalNumber, main) ? { callingCode: account.callingCode, nationalNumber, plan: main } : null;
}

function e164Of(reading: Reading): string {
  return reading.callingCode + reading.nationalNumber;
}

function isShaped(reading: Reading): boolean {
  return reading.plan.shape.test(reading.nationalNumber);
}

/** `normalizeWithLibphonenumber` on the fast-path facts, or UNDECIDED. */
function normalizeFast(digits: string, international: boolean, accountCountry: string): string | null | Undecided {
  if (!international) {
    const country = accountCountryOf(accountCountry);
    if (country !== null) {
      const account = countryPlan(country);
      if (account === null) return UNDECIDED;
      const national = readNationalFast(digits, account);
      if (national === UNDECIDED) return UNDECIDED;
      if (national !== null) {
        if (isShaped(national)) {
          if (
            national.nationalNumber === digits &&
            digits.startsWith(national.callingCode) &&
            account.hasTrunkPrefix
          ) {
            const intl = readInternationalFast(digits);
            if (intl === UNDECIDED) return UNDECIDED;
            if (intl !== null && intl.callingCode === national.callingCode && isShaped(intl)) return e164Of(intl);
          }
          return e164Of(national);
        }
        const intl = readInternationalFast(digits);
        if (intl === UNDECIDED) return UNDECIDED;
        return e164Of(intl !== null && isShaped(intl) ? intl : national);
      }
    }
  }
  const intl = readInternationalFast(digits);
  return intl === UNDECIDED || intl === null ? intl : e164Of(intl);
}

// --- libphonenumber path ----------------------------------------------------

function normalizeWithLibphonenumber(digits: string, international: boolean, accountCountry: string): string | null {
  if (international) {
    const pn = readInternational(digits);
    return pn === null ? null : e164(pn);
  }

  const country = accountCountryOf(accountCountry);
  if (country !== null) {
    const national = parsePhoneNumberFromString(digits, { defaultCountry: country, extract: false }, FAST_METADATA);
    if (national !== undefined && national.isPossible()) {
      if (hasShape(national)) {
        // Both "national form without trunk prefix" and "already starting with
        // the calling code" fit (e.g. DE `491701234567`): in a country with a
        // trunk prefix, national numbers are written with it, so digits that
        // start with the calling code instead are taken as calling code first
        // when that reading is possible and shaped too.
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
      // Length-possible but not shaped like a number of the account country:
      // prefer the international reading only if that one is possible AND shaped.
      const intl = readInternational(digits);
      return e164(intl !== null && hasShape(intl) ? intl : national);
    }
  }
  const intl = readInternational(digits);
  return intl === null ? null : e164(intl);
}

// --- public API -------------------------------------------------------------

/**
 * Normalise a user-supplied phone number to E.164 digits without `+`
 * (e.g. `420777123456`), or null when it is not a possible number.
 */
export function normalizePhone(input: string, accountCountry: CountryCode): string | null {
  if (typeof input !== 'string') return null;
  const s = input.trim();
  if (s.length === 0 || s.length > MAX_INPUT_LENGTH) return null;

  let digits = s.replace(NON_DIGITS, '');
  const plus = s.charCodeAt(0) === 43; /* '+' */
  const zeroZero = !plus && s.charCodeAt(0) === 48 && s.charCodeAt(1) === 48; /* '00' */
  if (zeroZero) digits = digits.slice(2);
  if (digits.length === 0 || digits.length > MAX_DIGITS) return null;

  const international = plus || zeroZero;
  const fast = normalizeFast(digits, international, accountCountry);
  return fast !== UNDECIDED ? fast : normalizeWithLibphonenumber(digits, international, accountCountry);
}

/** Calling code prefix of E.164 digits ('420777…' → '420', '1415…' → '1'), or null. */
export function callingCodeOf(digits: string): string | null {
  if (typeof digits !== 'string') return null;
  const d = digits.charCodeAt(0) === 43 ? digits.slice(1) : digits;
  if (d.length < 2 || !ALL_DIGITS.test(d)) return null;
  // Calling codes are prefix-free (E.164), so the first match is the only one.
  for (let len = 1; len <= 3 && len < d.length; len++) {
    const cc = d.slice(0, len);
    if (CALLING_CODES.has(cc)) return cc;
  }
  return null;
}

/**
 * ISO alpha-2 of an E.164 digits string (e.g. '420777123456' → 'CZ'), or null when unknown.
 *
 * For calling codes shared by several countries (+1 NANP, +7, +44, …) the
 * exact country comes from libphonenumber's resolution (e.g. +1 876 → JM,
 * +1 416 → CA); when it cannot tell, the main country of the calling code is
 * returned (+1 → US, +44 → GB). Non-geographic codes (+800, +882, …) → null.
 */
export function countryOfE164(digits: string): CountryCode | null {
  const cc = callingCodeOf(digits);
  if (cc === null) return null;
  const countries = COUNTRIES_BY_CALLING_CODE.get(cc);
  const main = countries?.[0];
  if (countries === undefined || main === undefined) return null;
  if (countries.length === 1) return main;
  const d = digits.charCodeAt(0) === 43 ? digits.slice(1) : digits;
  if (d.length > MAX_DIGITS) return main;
  const pn = parsePhoneNumberFromString('+' + d, metadataJson);
  return pn?.country ?? main;
}
