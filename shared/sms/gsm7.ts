/**
 * SMS text handling per 3GPP TS 23.038 (GSM 03.38): default-alphabet detection, septet counting,
 * transliteration for `sms.type = 'sms'`, splitting into concatenated parts, and the GSM-7
 * (unpacked, one septet per octet) and UCS-2 (UTF-16BE) byte encodings.
 *
 * Pure and allocation-light: it runs per recipient on the send path, so every per-character
 * decision is a typed-array lookup built once at module load; the only Map lookups happen for
 * characters that are not GSM-7 in the first place.
 */
export type SmsEncoding = 'gsm7' | 'ucs2';

// ---------------------------------------------------------------------------------------------
// The 23.038 tables
// ---------------------------------------------------------------------------------------------

/**
 * Default alphabet (23.038 §6.2.1) in septet order, 16 per row. Position 0x1B is the escape to the
 * extension table, not a character; the placeholder there is skipped when building lookups.
 * 0x09 is CAPITAL C cedilla (Ç): the lowercase ç is not in the alphabet.
 */
const BASIC_ALPHABET =
  '@£$¥èéùìòÇ\nØø\rÅå' +
  'Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ' +
  ' !"#¤%&\'()*+,-./' +
  '0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNO' +
  'PQRSTUVWXYZÄÖÑÜ§' +
  '¿abcdefghijklmno' +
  'pqrstuvwxyzäöñüà';

const ESC = 0x1b;

/** Extension table (23.038 §6.2.1.1): sent as ESC + code, so each costs two septets. */
const EXTENSION: ReadonlyArray<readonly [number, string]> = [
  [0x0a, '\f'], // page break
  [0x14, '^'],
  [0x28, '{'],
  [0x29, '}'],
  [0x2f, '\\'],
  [0x3c, '['],
  [0x3d, '~'],
  [0x3e, ']'],
  [0x40, '|'],
  [0x65, '€'],
];

/** Highest UTF-16 code unit that is GSM-7 is € (U+20AC); tables stop there. */
const TABLE_SIZE = 0x20ac + 1;
/** Septets per UTF-16 code unit: 0 = not GSM-7, 1 = default alphabet, 2 = extension table. */
const SEPTETS = new Uint8Array(TABLE_SIZE);
/** UTF-16 code unit -> septet code (| EXT_FLAG for extension characters). */
const TO_GSM = new Uint16Array(TABLE_SIZE);
const EXT_FLAG = 0x100;
/** Septet -> UTF-16 code unit, for decoding. */
const FROM_BASIC = new Uint16Array(128);
const FROM_EXT = new Uint16Array(128);

if (BASIC_ALPHABET.length !== 128) throw new Error('gsm7: default alphabet table must have 128 entries');
for (let septet = 0; septet < 128; septet++) {
  if (septet === ESC) continue;
  const unit = BASIC_ALPHABET.charCodeAt(septet);
  SEPTETS[unit] = 1;
  TO_GSM[unit] = septet;
  FROM_BASIC[septet] = unit;
}
// An escape to an undefined extension position shows the default-alphabet character for that
// code (23.038 §6.2.1.1), so the extension decode table starts as a copy of the basic one.
FROM_EXT.set(FROM_BASIC);
// ESC ESC is reserved for a further extension table; receivers display it as a space.
FROM_EXT[ESC] = 0x20;
for (const [septet, char] of EXTENSION) {
  const unit = char.charCodeAt(0);
  SEPTETS[unit] = 2;
  TO_GSM[unit] = septet | EXT_FLAG;
  FROM_EXT[septet] = unit;
}

// ---------------------------------------------------------------------------------------------
// Detection and counting
// ---------------------------------------------------------------------------------------------

/** Septet count of `text`, or -1 as soon as a character outside 23.038 (basic + extension) is seen. */
function countSeptets(text: string): number {
  let total = 0;
  for (let i = 0, n = text.length; i < n; i++) {
    const unit = text.charCodeAt(i);
    const s = unit < TABLE_SIZE ? (SEPTETS[unit] ?? 0) : 0;
    if (s === 0) return -1;
    total += s;
  }
  return total;
}

/** True when every character is in the default alphabet or its extension table. */
export function isGsm7(text: string): boolean {
  return countSeptets(text) >= 0;
}

/** Septets needed for `text` (extension characters count two). Throws if `text` is not GSM-7. */
export function gsm7Septets(text: string): number {
  const total = countSeptets(text);
  if (total < 0) throw notGsm7(text);
  return total;
}

function notGsm7(text: string): RangeError {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= TABLE_SIZE || SEPTETS[unit] === 0) {
      const cp = text.codePointAt(i) ?? unit;
      return new RangeError(`Not GSM-7: U+${cp.toString(16).toUpperCase().padStart(4, '0')} at index ${i}`);
    }
  }
  return new RangeError('Not GSM-7');
}

// ---------------------------------------------------------------------------------------------
// Transliteration (sms.type = 'sms')
// ---------------------------------------------------------------------------------------------

/** Non-GSM BMP code unit -> GSM-7 replacement ('' = drop on purpose). Absent = drop. */
const TRANSLIT = new Map<number, string>();
/** Non-BMP code point -> GSM-7 replacement (styled "fancy text" letters). */
const TRANSLIT_ASTRAL = new Map<number, string>();

/**
 * Hand-made replacements: letters with no canonical decomposition (stroke, ligature, thorn...)
 * and punctuation people paste from word processors. Values may use any character the tables
 * resolve to GSM-7; everything is checked when the tables are finalised below.
 */
const MANUAL: Record<string, string> = {
  // whitespace and invisible characters
  '\t': ' ', '\u00a0': ' ', '\u1680': ' ', '\u202f': ' ', '\u205f': ' ', '\u3000': ' ',
  '\u00ad': '', '\u200b': '', '\u200c': '', '\u200d': '', '\u200e': '', '\u200f': '', '\u2060': '', '\ufeff': '',
  // quotes, apostrophes, primes
  '`': "'", '´': "'", '\u2018': "'", '\u2019': "'", '\u201a': "'", '\u201b': "'", '\u2032': "'", '\u2035': "'",
  '\u02b9': "'", '\u02bb': "'", '\u02bc': "'", '\u02c8': "'", '\u2039': "'", '\u203a': "'",
  '\u201c': '"', '\u201d': '"', '\u201e': '"', '\u201f': '"', '\u2033': '"', '\u2036': '"', '\u02ba': '"',
  '«': '"', '»': '"',
  // dashes, bullets, dots
  '\u2010': '-', '\u2011': '-', '\u2012': '-', '\u2013': '-', '\u2014': '-', '\u2015': '-', '\u2212': '-',
  '\u2043': '-', '\u2022': '-',
  '\u2026': '...', '\u2024': '.', '\u2025': '..', '·': '.', '\u2044': '/',
  // Latin-1 symbols with a conventional ASCII spelling
  '¦': '|', '©': '(c)', '®': '(R)', '\u2122': 'TM', '\u2116': 'No', 'ª': 'a', 'º': 'o',
  '±': '+/-', '×': 'x', '÷': '/', '¹': '1', '²': '2', '³': '3', '¼': '1/4', '½': '1/2', '¾': '3/4',
  'µ': 'u', '\u2190': '<-', '\u2192': '->',
  // letters without a canonical decomposition
  'Ð': 'D', 'ð': 'd', 'Þ': 'Th', 'þ': 'th', 'Đ': 'D', 'đ': 'd', 'Ħ': 'H', 'ħ': 'h', 'ı': 'i', 'ĸ': 'k',
  'Ŀ': 'L', 'ŀ': 'l', 'Ł': 'L', 'ł': 'l', 'Ŋ': 'N', 'ŋ': 'n', 'Œ': 'OE', 'œ': 'oe', 'Ŧ': 'T', 'ŧ': 't',
  'ẞ': 'SS', // ß itself is GSM-7 (0x1E) and is kept
  'ƀ': 'b', 'Ɓ': 'B', 'Ƈ': 'C', 'ƈ': 'c', 'Ɗ': 'D', 'Ƌ': 'D', 'ƌ': 'd', 'Ƒ': 'F', 'ƒ': 'f', 'Ɠ': 'G',
  'Ɨ': 'I', 'Ƙ': 'K', 'ƙ': 'k', 'ƚ': 'l', 'Ɲ': 'N', 'ƞ': 'n', 'Ɵ': 'O', 'Ƥ': 'P', 'ƥ': 'p', 'ƫ': 't',
  'Ƭ': 'T', 'ƭ': 't', 'Ʈ': 'T', 'Ʋ': 'V', 'Ƴ': 'Y', 'ƴ': 'y', 'Ƶ': 'Z', 'ƶ': 'z', 'Ǥ': 'G', 'ǥ': 'g',
  'ȡ': 'd', 'ȴ': 'l', 'ȵ': 'n', 'ȶ': 't', 'ȷ': 'j', 'Ⱥ': 'A', 'Ȼ': 'C', 'ȼ': 'c', 'Ƚ': 'L', 'Ⱦ': 'T',
  'ȿ': 's', 'ɀ': 'z', 'Ƀ': 'B', 'Ʉ': 'U', 'Ɇ': 'E', 'ɇ': 'e', 'Ɉ': 'J', 'ɉ': 'j', 'Ɋ': 'Q', 'ɋ': 'q',
  'Ɍ': 'R', 'ɍ': 'r', 'Ɏ': 'Y', 'ɏ': 'y',
  // Greek capitals that look like Latin ones; the other ten capitals are in the GSM alphabet
  'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
  'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
};

/** Cyrillic (Russian, Ukrainian, Belarusian, Serbian, Macedonian, Bulgarian) lowercase -> Latin. */
const CYRILLIC: Record<string, string> = {
  'а': 'a', 'б': 'b', 'в': 'v', 'г': 'g', 'д': 'd', 'е': 'e', 'ё': 'e', 'ж': 'zh', 'з': 'z', 'и': 'i',
  'й': 'y', 'к': 'k', 'л': 'l', 'м': 'm', 'н': 'n', 'о': 'o', 'п': 'p', 'р': 'r', 'с': 's', 'т': 't',
  'у': 'u', 'ф': 'f', 'х': 'kh', 'ц': 'ts', 'ч': 'ch', 'ш': 'sh', 'щ': 'shch', 'ъ': '', 'ы': 'y', 'ь': '',
  'э': 'e', 'ю': 'yu', 'я': 'ya', 'є': 'ye', 'і': 'i', 'ї': 'yi', 'ґ': 'g', 'ў': 'u', 'ђ': 'dj', 'ј': 'j',
  'љ': 'lj', 'њ': 'nj', 'ћ': 'c', 'џ': 'dz', 'ѓ': 'gj', 'ќ': 'kj', 'ѕ': 'dz',
};

/** Combining diacritical marks (the blocks canonical decompositions use). */
function isCombiningMark(unit: number): boolean {
  return (
    (unit >= 0x0300 && unit <= 0x036f) ||
    (unit >= 0x1ab0 && unit <= 0x1aff) ||
    (unit >= 0x1dc0 && unit <= 0x1dff) ||
    (unit >= 0x20d0 && unit <= 0x20ff) ||
    (unit >= 0xfe20 && unit <= 0xfe2f)
  );
}

/** Map one character to GSM-7 using what is known so far; '' when there is nothing sensible. */
function resolveChar(char: string): string {
  if (isGsm7(char)) return char;
  const known = TRANSLIT.get(char.charCodeAt(0));
  return char.length === 1 && known !== undefined ? known : '';
}

/**
 * Best GSM-7 rendering of a base letter plus combining marks: keep as many leading marks as still
 * compose to a GSM-7 letter (so "Ǻ" becomes "Å", "ç" becomes "c"), else the bare base letter.
 */
function resolveCluster(cluster: string): string {
  for (let k = cluster.length; k > 1; k--) {
    const composed = cluster.slice(0, k).normalize('NFC');
    if (isGsm7(composed)) return composed;
  }
  return resolveChar(cluster.slice(0, 1));
}

/** GSM-7 rendering of a string's decomposition (base letters, diacritics removed). */
function fromDecomposition(decomposed: string): string {
  let out = '';
  let i = 0;
  while (i < decomposed.length) {
    let j = i + 1;
    while (j < decomposed.length && isCombiningMark(decomposed.charCodeAt(j))) j++;
    out += isCombiningMark(decomposed.charCodeAt(i)) ? '' : resolveCluster(decomposed.slice(i, j));
    i = j;
  }
  return out;
}

function buildTransliteration(): void {
  for (const [char, replacement] of Object.entries(MANUAL)) TRANSLIT.set(char.charCodeAt(0), replacement);
  // En quad .. hair space (U+2000-200A) are all just spaces; line/paragraph separators are breaks.
  for (let unit = 0x2000; unit <= 0x200a; unit++) TRANSLIT.set(unit, ' ');
  TRANSLIT.set(0x2028, '\n');
  TRANSLIT.set(0x2029, '\n');
  TRANSLIT.set(0x0085, '\n');
  for (const [lower, latin] of Object.entries(CYRILLIC)) {
    TRANSLIT.set(lower.charCodeAt(0), latin);
    const upper = lower.toUpperCase();
    TRANSLIT.set(upper.charCodeAt(0), latin.charAt(0).toUpperCase() + latin.slice(1));
  }
  const derive = (from: number, to: number, map: (char: string) => string): void => {
    for (let unit = from; unit <= to; unit++) {
      if ((unit < TABLE_SIZE && SEPTETS[unit] !== 0) || TRANSLIT.has(unit)) continue;
      const char = String.fromCharCode(unit);
      const replacement = map(char);
      if (replacement !== '') TRANSLIT.set(unit, replacement);
    }
  };
  // Latin-1 letters, Latin Extended-A/B, Latin Extended Additional (Vietnamese etc.): strip
  // diacritics via compatibility decomposition, which also splits ligatures such as "ǅ" -> "Dž" -> "Dz".
  const latin = (char: string): string => fromDecomposition(char.normalize('NFKD'));
  derive(0x00c0, 0x024f, latin);
  derive(0x1e00, 0x1eff, latin);
  // Greek: GSM-7 has only capitals, so upper-case first (ς -> Σ, ά -> Ά -> Α -> A).
  const greek = (char: string): string => fromDecomposition(char.toUpperCase().normalize('NFD'));
  derive(0x0370, 0x03ff, greek);
  derive(0x1f00, 0x1fff, greek);
  // Fullwidth ASCII and Latin ligatures (ﬁ) fold to plain letters under compatibility decomposition.
  const compat = (char: string): string => fromDecomposition(char.normalize('NFKD'));
  derive(0xff01, 0xff5e, compat);
  derive(0xfb00, 0xfb06, compat);
  // Mathematical alphanumerics (bold/italic "fancy text" from social media) are outside the BMP.
  for (let cp = 0x1d400; cp <= 0x1d7ff; cp++) {
    const replacement = fromDecomposition(String.fromCodePoint(cp).normalize('NFKD'));
    if (replacement !== '') TRANSLIT_ASTRAL.set(cp, replacement);
  }
  // Every replacement must itself be GSM-7, or 'sms' type could emit UCS-2.
  for (const table of [TRANSLIT, TRANSLIT_ASTRAL]) {
    for (const [key, value] of table) {
      if (!isGsm7(value)) throw new Error(`gsm7: transliteration of U+${key.toString(16)} is not GSM-7`);
    }
  }
}
buildTransliteration();

/**
 * Rewrite `text` into the GSM-7 alphabet for `sms.type = 'sms'`: characters already in 23.038 are
 * kept, accented letters lose the diacritic the alphabet lacks, typographic punctuation becomes
 * ASCII, and anything without a sensible mapping (emoji, CJK, ...) is dropped. Returns `text`
 * itself when it is already GSM-7.
 */
export function transliterateToGsm7(text: string): string {
  return transliterate(text, false);
}

function transliterate(text: string, normalized: boolean): string {
  let out = '';
  // Start of the current run of characters copied unchanged; copied with one slice, not per char.
  let runStart = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const unit = text.charCodeAt(i);
    if (unit < TABLE_SIZE && SEPTETS[unit] !== 0) continue;
    if (!normalized && isCombiningMark(unit)) {
      // Decomposed input ("e" + U+0301): compose first so "é" survives as the GSM-7 letter. NFC
      // leaves the GSM-7 prefix processed so far unchanged, so restarting is safe and rare.
      return transliterate(text.normalize('NFC'), true);
    }
    if (i > runStart) out += text.slice(runStart, i);
    let replacement: string | undefined;
    const next = i + 1 < n ? text.charCodeAt(i + 1) : 0;
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      replacement = TRANSLIT_ASTRAL.get(((unit - 0xd800) << 10) + (next - 0xdc00) + 0x10000);
      i++; // consume the whole surrogate pair
    } else {
      replacement = TRANSLIT.get(unit);
    }
    if (replacement !== undefined) out += replacement;
    runStart = i + 1;
  }
  if (runStart === 0) return text;
  return runStart < n ? out + text.slice(runStart) : out;
}

// ---------------------------------------------------------------------------------------------
// Planning (encoding + parts)
// ---------------------------------------------------------------------------------------------

/** Single-part capacity: 140 octets of user data = 160 septets = 70 UCS-2 units. */
const GSM7_SINGLE = 160;
const UCS2_SINGLE = 70;
/** Concatenated parts lose 6 octets to the User Data Header (8-bit reference IE): 153 / 67. */
const GSM7_PART = 153;
const UCS2_PART = 67;

export interface SmsPlan {
  encoding: SmsEncoding;
  /** The text actually sent (transliterated for type 'sms'). */
  text: string;
  /** The text of each part, in order; `parts.join('') === text`; length is the billing count. */
  parts: string[];
}

/**
 * Decide encoding and parts for one SMS. `utf`: GSM-7 when the text fits 23.038, else UCS-2.
 * `sms`: transliterate to GSM-7 first (the text may shrink, possibly to '').
 */
export function planSms(text: string, type: 'utf' | 'sms'): SmsPlan {
  if (type !== 'utf' && type !== 'sms') throw new TypeError(`Unknown sms type: ${String(type)}`);
  const sent = type === 'sms' ? transliterateToGsm7(text) : text;
  const septets = countSeptets(sent);
  if (septets >= 0) return { encoding: 'gsm7', text: sent, parts: splitGsm7(sent, septets) };
  return { encoding: 'ucs2', text: sent, parts: splitUcs2(sent) };
}

/** Split at 153 septets; an extension character that would straddle the boundary moves whole. */
function splitGsm7(text: string, septets: number): string[] {
  if (septets <= GSM7_SINGLE) return [text];
  const parts: string[] = [];
  let start = 0;
  let used = 0;
  for (let i = 0, n = text.length; i < n; i++) {
    const s = SEPTETS[text.charCodeAt(i)] ?? 0;
    if (used + s > GSM7_PART) {
      parts.push(text.slice(start, i));
      start = i;
      used = 0;
    }
    used += s;
  }
  parts.push(text.slice(start));
  return parts;
}

/** Split at 67 UTF-16 units; a surrogate pair that would straddle the boundary moves whole. */
function splitUcs2(text: string): string[] {
  const n = text.length;
  if (n <= UCS2_SINGLE) return [text];
  const parts: string[] = [];
  let start = 0;
  while (n - start > UCS2_PART) {
    let end = start + UCS2_PART;
    const last = text.charCodeAt(end - 1);
    const next = text.charCodeAt(end);
    if (last >= 0xd800 && last <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) end--;
    parts.push(text.slice(start, end));
    start = end;
  }
  parts.push(text.slice(start));
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Byte encodings
// ---------------------------------------------------------------------------------------------

/**
 * GSM-7 as one septet per octet (values 0..127, what SMPP data_coding 0 carries before any
 * packing); extension characters become ESC (0x1B) + code. Throws if `text` is not GSM-7.
 */
export function encodeGsm7Unpacked(text: string): Buffer {
  const out = Buffer.allocUnsafe(gsm7Septets(text));
  let o = 0;
  for (let i = 0, n = text.length; i < n; i++) {
    const code = TO_GSM[text.charCodeAt(i)] ?? 0;
    if (code & EXT_FLAG) out[o++] = ESC;
    out[o++] = code & 0x7f;
  }
  return out;
}

/**
 * Inverse of encodeGsm7Unpacked. Per 23.038 an escape to an undefined extension code shows the
 * default-alphabet character, ESC ESC shows a space, and a trailing lone ESC (a pair cut off) is
 * ignored. Throws on octets above 0x7F, which cannot be septets.
 */
export function decodeGsm7Unpacked(buf: Buffer): string {
  // Build UTF-16LE bytes and decode once: faster than string concatenation per character.
  const out = Buffer.allocUnsafe(buf.length * 2);
  let o = 0;
  for (let i = 0, n = buf.length; i < n; i++) {
    let septet = buf[i] ?? 0;
    let table = FROM_BASIC;
    if (septet === ESC) {
      if (i + 1 >= n) break;
      septet = buf[++i] ?? 0;
      table = FROM_EXT;
    }
    if (septet > 0x7f) throw new RangeError(`Not a GSM-7 septet: 0x${septet.toString(16)} at offset ${i}`);
    const unit = table[septet] ?? 0;
    out[o++] = unit & 0xff;
    out[o++] = unit >>> 8;
  }
  return out.toString('utf16le', 0, o);
}

/** UCS-2 as sent over SMS: UTF-16 big-endian code units (surrogate pairs passed through as-is). */
export function encodeUcs2(text: string): Buffer {
  return Buffer.from(text, 'utf16le').swap16();
}

/** Inverse of encodeUcs2. Throws on an odd byte count (a code unit cut in half). */
export function decodeUcs2(buf: Buffer): string {
  if (buf.length % 2 !== 0) throw new RangeError(`UCS-2 data has odd length ${buf.length}`);
  return Buffer.from(buf).swap16().toString('utf16le');
}
