import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SegmentedMessage } from 'sms-segments-calculator';

import {
  decodeGsm7Unpacked,
  decodeUcs2,
  encodeGsm7Unpacked,
  encodeUcs2,
  gsm7Septets,
  isGsm7,
  planSms,
  transliterateToGsm7,
  type SmsEncoding,
} from '../../shared/sms/gsm7.js';
import { seededRng } from '../support/prng.js';

/** 3GPP TS 23.038 default alphabet in septet order (0x1B = ESC is not a character). */
const BASIC_BY_SEPTET =
  '@£$¥èéùìòÇ\nØø\rÅå' +
  'Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ' +
  ' !"#¤%&\'()*+,-./' +
  '0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNO' +
  'PQRSTUVWXYZÄÖÑÜ§' +
  '¿abcdefghijklmno' +
  'pqrstuvwxyzäöñüà';
const BASIC = BASIC_BY_SEPTET.replace('\x1b', '');
const EXTENSION = '\f^{}\\[~]|€';

const a = (n: number): string => 'a'.repeat(n);
const zh = (n: number): string => 'ж'.repeat(n); // Cyrillic: one UTF-16 unit, forces UCS-2

function partLengths(text: string, type: 'utf' | 'sms' = 'utf'): { encoding: SmsEncoding; lengths: number[] } {
  const plan = planSms(text, type);
  assert.equal(plan.parts.join(''), plan.text, 'parts must reassemble the sent text');
  const lengths = plan.parts.map((p) => (plan.encoding === 'gsm7' ? gsm7Septets(p) : p.length));
  return { encoding: plan.encoding, lengths };
}

// ------------------------------------------------------------------------------------------------
// Boundaries
// ------------------------------------------------------------------------------------------------

const boundaryCases: Array<{ name: string; text: string; encoding: SmsEncoding; lengths: number[] }> = [
  { name: 'empty string is one part', text: '', encoding: 'gsm7', lengths: [0] },
  { name: 'GSM 160 septets: single', text: a(160), encoding: 'gsm7', lengths: [160] },
  { name: 'GSM 161 septets: two parts', text: a(161), encoding: 'gsm7', lengths: [153, 8] },
  { name: 'GSM 306 septets: two parts', text: a(306), encoding: 'gsm7', lengths: [153, 153] },
  { name: 'GSM 307 septets: three parts', text: a(307), encoding: 'gsm7', lengths: [153, 153, 1] },
  { name: 'GSM 459 septets: three parts', text: a(459), encoding: 'gsm7', lengths: [153, 153, 153] },
  { name: 'GSM 460 septets: four parts', text: a(460), encoding: 'gsm7', lengths: [153, 153, 153, 1] },
  { name: '159 chars incl. one € = 160 septets: single', text: a(158) + '€', encoding: 'gsm7', lengths: [160] },
  { name: '159 chars incl. two € = 161 septets: two parts', text: a(157) + '€€', encoding: 'gsm7', lengths: [153, 8] },
  { name: '160 chars incl. € = 161 septets: two parts', text: a(159) + '€', encoding: 'gsm7', lengths: [153, 8] },
  // 152 + ESC would leave the € code alone in part 2: the pair moves whole, part 1 has 152 septets.
  { name: 'escape pair straddling 153 moves whole', text: a(152) + '€' + a(10), encoding: 'gsm7', lengths: [152, 12] },
  { name: 'escape pair ending exactly at 153 stays', text: a(151) + '€' + a(10), encoding: 'gsm7', lengths: [153, 10] },
  {
    name: 'escape pair straddling the second boundary',
    text: a(153) + a(152) + '[' + a(5),
    encoding: 'gsm7',
    lengths: [153, 152, 7],
  },
  { name: '80 extension chars = 160 septets: single', text: '€'.repeat(80), encoding: 'gsm7', lengths: [160] },
  { name: '81 extension chars: 76 per part', text: '€'.repeat(81), encoding: 'gsm7', lengths: [152, 10] },
  { name: 'UCS-2 70 units: single', text: zh(70), encoding: 'ucs2', lengths: [70] },
  { name: 'UCS-2 71 units: two parts', text: zh(71), encoding: 'ucs2', lengths: [67, 4] },
  { name: 'UCS-2 134 units: two parts', text: zh(134), encoding: 'ucs2', lengths: [67, 67] },
  { name: 'UCS-2 135 units: three parts', text: zh(135), encoding: 'ucs2', lengths: [67, 67, 1] },
  { name: 'UCS-2 201 units: three parts', text: zh(201), encoding: 'ucs2', lengths: [67, 67, 67] },
  // Extension characters cost one unit in UCS-2, not two.
  { name: 'extension chars in UCS-2 count one unit', text: '{'.repeat(69) + 'ж', encoding: 'ucs2', lengths: [70] },
  { name: 'one non-GSM char makes the whole text UCS-2', text: a(100) + 'ç', encoding: 'ucs2', lengths: [67, 34] },
  { name: 'emoji ending at 70 units: single', text: zh(68) + '😀', encoding: 'ucs2', lengths: [70] },
  { name: 'emoji ending at 71 units: two parts', text: zh(69) + '😀', encoding: 'ucs2', lengths: [67, 4] },
  { name: 'emoji ending exactly at 67 stays', text: zh(65) + '😀' + zh(10), encoding: 'ucs2', lengths: [67, 10] },
  // Units 66/67 would be the high/low surrogate: the pair moves whole, part 1 has 66 units.
  { name: 'surrogate pair straddling 67 moves whole', text: zh(66) + '😀' + zh(10), encoding: 'ucs2', lengths: [66, 12] },
  {
    name: 'surrogate pair straddling the second boundary',
    text: zh(67) + zh(66) + '🎉' + zh(3),
    encoding: 'ucs2',
    lengths: [67, 66, 5],
  },
];

for (const c of boundaryCases) {
  test(`planSms boundary: ${c.name}`, () => {
    const got = partLengths(c.text);
    assert.deepEqual(got, { encoding: c.encoding, lengths: c.lengths });
  });
}

test('planSms: a pair moved across a boundary starts the next part', () => {
  const plan = planSms(zh(66) + '😀' + zh(10), 'utf');
  assert.equal(plan.parts[0], zh(66));
  assert.equal(plan.parts[1], '😀' + zh(10));
  const gsm = planSms(a(152) + '€' + a(10), 'utf');
  assert.equal(gsm.parts[0], a(152));
  assert.equal(gsm.parts[1], '€' + a(10));
});

test('planSms: utf keeps the text as given', () => {
  const text = 'Příliš žluťoučký kůň';
  const plan = planSms(text, 'utf');
  assert.equal(plan.encoding, 'ucs2');
  assert.equal(plan.text, text);
  assert.deepEqual(plan.parts, [text]);
  assert.deepEqual(planSms('Hello {name} €5', 'utf'), { encoding: 'gsm7', text: 'Hello {name} €5', parts: ['Hello {name} €5'] });
});

test('planSms: sms type transliterates and always sends GSM-7', () => {
  assert.deepEqual(planSms('Hi 😀 there 🎉!', 'sms'), { encoding: 'gsm7', text: 'Hi  there !', parts: ['Hi  there !'] });
  // 200 x "č": UCS-2 would be 3 parts; transliterated it is 200 septets = 2 parts.
  assert.equal(planSms('č'.repeat(200), 'utf').parts.length, 3);
  const plan = planSms('č'.repeat(200), 'sms');
  assert.equal(plan.encoding, 'gsm7');
  assert.equal(plan.text, 'c'.repeat(200));
  assert.equal(plan.parts.length, 2);
  // Everything dropped: still one (empty) part.
  assert.deepEqual(planSms('😀🎉中文', 'sms'), { encoding: 'gsm7', text: '', parts: [''] });
});

test('planSms: rejects an unknown type at runtime', () => {
  assert.throws(() => planSms('x', 'unicode' as 'utf'), TypeError);
});

// ------------------------------------------------------------------------------------------------
// Detection and counting
// ------------------------------------------------------------------------------------------------

test('isGsm7 / gsm7Septets: 23.038 basic and extension tables', () => {
  assert.equal(BASIC.length, 127);
  assert.ok(isGsm7(BASIC));
  assert.equal(gsm7Septets(BASIC), 127);
  assert.ok(isGsm7(EXTENSION));
  assert.equal(gsm7Septets(EXTENSION), 20);
  for (const ch of EXTENSION) assert.equal(gsm7Septets(ch), 2, JSON.stringify(ch));
  assert.equal(gsm7Septets(''), 0);
  assert.ok(isGsm7(''));
  // 0x09 is CAPITAL C cedilla; lowercase ç is not in the alphabet.
  assert.ok(isGsm7('Ç'));
  assert.ok(!isGsm7('ç'));
  assert.ok(isGsm7('ß'));
  for (const ch of ['`', '\t', '\x1b', '\0', 'á', 'č', '€€ж', '😀', '\u00a0', 'α']) assert.ok(!isGsm7(ch), JSON.stringify(ch));
});

test('gsm7Septets throws on non-GSM text, naming the character', () => {
  assert.throws(() => gsm7Septets('abc😀'), { name: 'RangeError', message: /U\+1F600 at index 3/ });
  assert.throws(() => gsm7Septets('ç'), RangeError);
});

test('alphabet agrees with sms-segments-calculator for every BMP code unit', () => {
  for (let unit = 0; unit <= 0xffff; unit++) {
    const ch = String.fromCharCode(unit);
    const theirs = new SegmentedMessage(ch);
    const gsm = isGsm7(ch);
    assert.equal(theirs.encodingName === 'GSM-7', gsm, `U+${unit.toString(16)}`);
    if (gsm) assert.equal(gsm7Septets(ch), theirs.numberOfCharacters, `septets of U+${unit.toString(16)}`);
  }
});

// ------------------------------------------------------------------------------------------------
// Transliteration
// ------------------------------------------------------------------------------------------------

test('transliterate: Czech pangram becomes GSM-7 only', () => {
  const out = transliterateToGsm7('Příliš žluťoučký kůň úpěl ďábelské ódy');
  // "é" is in the GSM alphabet (0x05) and is kept; every other diacritic is stripped.
  assert.equal(out, 'Prilis zlutoucky kun upel dabelské ody');
  assert.ok(isGsm7(out));
});

test('transliterate: diacritics to base letters, GSM letters kept', () => {
  const cases: Array<[string, string]> = [
    ['č', 'c'], ['ř', 'r'], ['ů', 'u'], ['ě', 'e'], ['ł', 'l'], ['Ł', 'L'], ['ç', 'c'],
    ['Zażółć gęślą jaźń', 'Zazolc gesla jazn'],
    ['Ľúbostná báseň', 'Lubostna basen'],
    ['é ü ñ Ä à Ç Ö Å Æ ø É', 'é ü ñ Ä à Ç Ö Å Æ ø É'],
    ['naïve façade', 'naive facade'],
    ['ÀÁÂÃ ÈÊË ÌÍÎÏ ÒÓÔÕ ÙÚÛ Ý ÿ', 'AAAA EEE IIII OOOO UUU Y y'],
    ['Şişli Ţară Ș ț', 'Sisli Tara S t'],
    ['Œuvre Ærø ŉ ſ ǅ', "OEuvre Ærø 'n s Dz"],
    ['Ǻ', 'Å'], // ring kept (GSM Å), acute dropped
    ['Tiếng Việt', 'Tieng Viet'],
    ['Привет, Жук!', 'Privet, Zhuk!'],
    ['Αθήνα', 'AΘHNA'], // GSM-7 has the Greek capitals Γ Δ Θ Λ Ξ Π Σ Φ Ψ Ω; the rest look like Latin
    ['ｆｕｌｌｗｉｄｔｈ ﬁ 𝐁𝐨𝐥𝐝', 'fullwidth fi Bold'],
    ['e\u0301 (decomposed)', 'é (decomposed)'], // composed first, so the GSM letter survives
    ['x\u0301', 'x'],
  ];
  for (const [input, expected] of cases) assert.equal(transliterateToGsm7(input), expected, input);
});

test('transliterate: ß is kept (it is GSM-7 0x1E, so no "ss" is needed)', () => {
  // Deviation from the brief's example ("ß"→"ss"): 23.038 has ß in the default alphabet and
  // GSM characters are kept. Only the capital ẞ (not in the alphabet) is spelled out.
  assert.equal(transliterateToGsm7('Straße'), 'Straße');
  assert.equal(transliterateToGsm7('STRAẞE'), 'STRASSE');
});

test('transliterate: punctuation and spaces', () => {
  assert.equal(transliterateToGsm7('‘single’ “double” „low“ «guillemets»'), '\'single\' "double" "low" "guillemets"');
  assert.equal(transliterateToGsm7('en – em — minus − ellipsis…'), 'en - em - minus - ellipsis...');
  assert.equal(transliterateToGsm7('a\u00a0b\u202fc\u2009d\te'), 'a b c d e');
  assert.equal(transliterateToGsm7('line\u2028para\u2029end'), 'line\npara\nend');
  assert.equal(transliterateToGsm7('soft\u00adhyphen zero\u200bwidth'), 'softhyphen zerowidth');
  assert.equal(transliterateToGsm7('`tick` © ® ™ ½ ×'), "'tick' (c) (R) TM 1/2 x");
});

test('transliterate: emoji, CJK and other unmappable characters are dropped', () => {
  assert.equal(transliterateToGsm7('Hi 😀👍🏽 there'), 'Hi  there');
  assert.equal(transliterateToGsm7('👨‍👩‍👧 family ❤️'), ' family ');
  assert.equal(transliterateToGsm7('日本語 mix 中文'), ' mix ');
  assert.equal(transliterateToGsm7('lone \ud800 surrogate \udc00'), 'lone  surrogate ');
});

test('transliterate: GSM-7 text is returned unchanged (same string)', () => {
  const text = BASIC + EXTENSION;
  assert.equal(transliterateToGsm7(text), text);
  assert.equal(transliterateToGsm7(''), '');
});

test('transliterate: output is GSM-7 for every BMP code unit and sampled astral characters', () => {
  for (let unit = 0; unit <= 0xffff; unit++) {
    const out = transliterateToGsm7(`x${String.fromCharCode(unit)}y`);
    assert.ok(isGsm7(out), `U+${unit.toString(16)} -> ${JSON.stringify(out)}`);
  }
  for (let cp = 0x10000; cp <= 0x10ffff; cp += 0x1f) {
    assert.ok(isGsm7(transliterateToGsm7(String.fromCodePoint(cp))), `U+${cp.toString(16)}`);
  }
});

// ------------------------------------------------------------------------------------------------
// Byte encodings
// ------------------------------------------------------------------------------------------------

test('encodeGsm7Unpacked: septet values per 23.038', () => {
  assert.deepEqual([...encodeGsm7Unpacked('@£$Ç\nA a_à')], [0x00, 0x01, 0x02, 0x09, 0x0a, 0x41, 0x20, 0x61, 0x11, 0x7f]);
  assert.deepEqual([...encodeGsm7Unpacked('€^{}\\[~]|\f')], [
    0x1b, 0x65, 0x1b, 0x14, 0x1b, 0x28, 0x1b, 0x29, 0x1b, 0x2f, 0x1b, 0x3c, 0x1b, 0x3d, 0x1b, 0x3e, 0x1b, 0x40, 0x1b, 0x0a,
  ]);
  const all = encodeGsm7Unpacked(BASIC_BY_SEPTET.replace('\x1b', ''));
  assert.deepEqual([...all], [...Array(128).keys()].filter((s) => s !== 0x1b));
  assert.equal(encodeGsm7Unpacked('').length, 0);
  assert.throws(() => encodeGsm7Unpacked('ok ж'), RangeError);
});

test('GSM-7 round trip incl. extension characters', () => {
  for (const text of ['', BASIC, EXTENSION, 'Price: €10 {a|b} [x] ~y^ \\z', a(152) + '€' + a(10)]) {
    const buf = encodeGsm7Unpacked(text);
    assert.equal(buf.length, gsm7Septets(text));
    assert.ok(buf.every((b) => b <= 0x7f));
    assert.equal(decodeGsm7Unpacked(buf), text);
  }
});

test('decodeGsm7Unpacked: irregular escapes per 23.038', () => {
  // ESC + undefined extension code shows the default-alphabet character.
  assert.equal(decodeGsm7Unpacked(Buffer.from([0x1b, 0x41, 0x62])), 'Ab');
  // ESC ESC is reserved; shown as a space.
  assert.equal(decodeGsm7Unpacked(Buffer.from([0x61, 0x1b, 0x1b, 0x62])), 'a b');
  // A trailing lone ESC (pair cut off) is ignored.
  assert.equal(decodeGsm7Unpacked(Buffer.from([0x61, 0x1b])), 'a');
  assert.throws(() => decodeGsm7Unpacked(Buffer.from([0x61, 0x80])), RangeError);
});

test('UCS-2: big-endian bytes and round trip incl. emoji', () => {
  assert.deepEqual([...encodeUcs2('A😀ж')], [0x00, 0x41, 0xd8, 0x3d, 0xde, 0x00, 0x04, 0x36]);
  for (const text of ['', 'Příliš žluťoučký kůň', '😀👍🏽👨‍👩‍👧 日本語', zh(66) + '😀' + zh(10), BASIC + EXTENSION]) {
    const buf = encodeUcs2(text);
    assert.equal(buf.length, text.length * 2);
    assert.equal(decodeUcs2(buf), text);
  }
  // Per-part encoding reassembles too (a part never ends in half a surrogate pair).
  const plan = planSms(zh(66) + '😀' + zh(100), 'utf');
  assert.equal(plan.parts.map((p) => decodeUcs2(encodeUcs2(p))).join(''), plan.text);
  assert.throws(() => decodeUcs2(Buffer.from([0x00, 0x41, 0x00])), RangeError);
});

test('decodeUcs2 does not modify its input', () => {
  const buf = Buffer.from([0x00, 0x41]);
  decodeUcs2(buf);
  assert.deepEqual([...buf], [0x00, 0x41]);
});

// ------------------------------------------------------------------------------------------------
// Property test against sms-segments-calculator
// ------------------------------------------------------------------------------------------------

const rng = seededRng;

const LATIN1 = Array.from({ length: 0x60 }, (_, i) => String.fromCharCode(0xa0 + i)).join('');
/*
 * Single-code-point emoji only. Excluded on purpose: multi-code-point grapheme clusters (skin-tone
 * modifiers, ZWJ sequences, flags, keycaps, combining marks). sms-segments-calculator never splits
 * a grapheme cluster across parts; we split UCS-2 on 16-bit units and only keep surrogate pairs
 * together. 23.038/23.040 define UCS-2 user data as a sequence of 16-bit characters and the parts
 * are reassembled before display, so splitting inside a cluster is valid and bills fewer parts;
 * see the explicit test below.
 */
const EMOJI = ['😀', '🎉', '👍', '🚀', '🔥', '💬', '📱', '✅', '❤', '☺'];
const POOLS = {
  basic: [...BASIC],
  ext: [...EXTENSION],
  latin1: [...LATIN1],
  emoji: EMOJI,
};
type PoolName = keyof typeof POOLS;
/** Mixes: mostly-GSM texts (so GSM boundaries get exercised), and UCS-2-heavy ones. */
const MIXES: Array<Array<[PoolName, number]>> = [
  [['basic', 1]],
  [['basic', 0.85], ['ext', 0.15]],
  [['basic', 0.99], ['latin1', 0.01]],
  [['basic', 0.97], ['emoji', 0.03]],
  [['basic', 0.5], ['ext', 0.1], ['latin1', 0.2], ['emoji', 0.2]],
  [['latin1', 0.5], ['emoji', 0.5]],
];
const NEAR = [67, 70, 134, 153, 160, 201, 306, 459];

function randomText(next: () => number): string {
  const mix = MIXES[Math.floor(next() * MIXES.length)] ?? MIXES[0]!;
  // Half the lengths land within ±3 characters of a boundary, the rest anywhere up to 500.
  const anchor = NEAR[Math.floor(next() * NEAR.length)] ?? 160;
  const length = next() < 0.5 ? Math.max(0, anchor - 3 + Math.floor(next() * 7)) : Math.floor(next() * 500);
  let text = '';
  for (let i = 0; i < length; i++) {
    let r = next();
    let pool: string[] = POOLS.basic;
    for (const [name, weight] of mix) {
      pool = POOLS[name];
      if ((r -= weight) < 0) break;
    }
    text += pool[Math.floor(next() * pool.length)] ?? 'a';
  }
  return text;
}

test('property: encoding and part count match sms-segments-calculator on 300 random texts', () => {
  const next = rng(0x5eed);
  const seen = new Set<string>();
  for (let n = 0; n < 300; n++) {
    const text = randomText(next);
    const ours = planSms(text, 'utf');
    const theirs = new SegmentedMessage(text);
    const context = `case ${n}: ${JSON.stringify(text)}`;
    assert.equal(ours.encoding, theirs.encodingName === 'GSM-7' ? 'gsm7' : 'ucs2', context);
    assert.equal(ours.parts.length, theirs.segmentsCount, context);
    assert.equal(ours.parts.join(''), text, context);
    for (const part of ours.parts) {
      if (ours.encoding === 'gsm7') assert.ok(gsm7Septets(part) <= (ours.parts.length === 1 ? 160 : 153), context);
      else assert.ok(part.length <= (ours.parts.length === 1 ? 70 : 67), context);
      const first = part.charCodeAt(0);
      assert.ok(!(first >= 0xdc00 && first <= 0xdfff), `part starts with a low surrogate, ${context}`);
    }
    seen.add(`${ours.encoding}/${ours.parts.length}`);
  }
  // The generator must actually reach multi-part texts in both encodings.
  for (const k of ['gsm7/1', 'gsm7/2', 'gsm7/3', 'gsm7/4', 'ucs2/1', 'ucs2/2', 'ucs2/3']) assert.ok(seen.has(k), k);
});

test('documented difference: grapheme clusters are split between code points, not kept whole', () => {
  // 65 units + 👍🏽 (two surrogate pairs) + 65 units = 134 units = exactly two UCS-2 parts for us:
  // part 1 ends after 👍, part 2 starts with the 🏽 modifier. The calculator moves the whole
  // cluster and needs a third part. If this assertion starts failing, the library changed and
  // the exclusion in the property test can be revisited.
  const text = zh(65) + '👍🏽' + zh(65);
  const ours = planSms(text, 'utf');
  assert.deepEqual(ours.parts, [zh(65) + '👍', '🏽' + zh(65)]);
  assert.equal(new SegmentedMessage(text).segmentsCount, 3);
});
