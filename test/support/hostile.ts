/**
 * Seeded generation of malformed requests for the hostile-input suite
 * (test/api/hostile-input.test.ts). A template is one valid request of an API family; `mutate`
 * turns it into a hostile one: wrong types, NUL characters and unpaired surrogates in strings,
 * huge numbers, extreme dates, `__proto__`/`constructor`/`prototype` keys, deep nesting, arrays
 * where objects belong and the reverse, overlong strings, and at the byte level truncated JSON,
 * invalid UTF-8, duplicate keys, wrong content types, empty bodies and malformed %-escapes in
 * paths, queries and forms. The same seed gives the same requests.
 */

import { seededRng } from './prng.js';

export { seededRng };
export type Rng = () => number;

export const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;
const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
const chance = (rng: Rng, p: number) => rng() < p;

export type Body =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'form'; fields: Record<string, string> }
  /** A form whose `XMLDATA` field is an XML document (the XML API). */
  | { kind: 'xml'; fields: Record<string, string> };

export interface Template {
  family: string;
  name: string;
  method: string;
  /** Path parameters in braces (`/admin/api/accounts/{12}/credit`): kept, or replaced by a hostile segment. */
  path: string;
  query?: Record<string, string>;
  headers: Record<string, string>;
  body: Body;
}

export interface HostileRequest {
  family: string;
  template: string;
  /** What was done to the template, for failure messages. */
  notes: string[];
  method: string;
  /** Percent-encoded, ASCII only. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export const LONG = 'x'.repeat(5000);

export const HOSTILE_STRINGS: readonly string[] = [
  '', ' ', '\u0000', 'a\u0000b', '\ud800', 'x\udc00', '\udc00\ud800', '\uffff', '\u0001\u001f', LONG, 'é'.repeat(1500), '💥'.repeat(1100),
  '%E0%A4%A', '%zz', 'http://%zz/', 'http://example.com:99999/', 'http://example.com:0/', 'javascript:alert(1)', 'http://127.0.0.1/',
  'ftp://example.com/', '-271821-04-20T00:00:00Z', '+275760-09-13T00:00:00Z', '+275760-09-13T00:00:00.001Z', '0000-01-01T00:00:00Z',
  '2026-02-30T25:61:00Z', '1970-01-01', '9999-12-31T23:59:59Z', '2026-13-01', '1e308', '-1', 'NaN', 'Infinity', 'null', 'true', '[]',
  '{}', '__proto__', 'constructor', '\u202e\u0000', "'; DROP TABLE accounts; --", '<x>&amp;', '&#0;', '\r\n', '\u2028', '\ufeff',
  '+420 777 123 456', '00420777123456', '420777777777', 'whsec_', 'sb_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'monday', '25:00', 'Mars/Olympus',
];

export const HOSTILE_NUMBERS: readonly number[] = [
  1e308, -1e308, 1e12, -1e12, 1e12 + 0.5, 0, -0, -1, 1, 1.5, 0.00001, 1e-7, Number.MAX_SAFE_INTEGER + 2, -(Number.MAX_SAFE_INTEGER + 2), 2 ** 63,
  1e14 - 0.0001, 5e-324, 65536, 99999, 1e14, 1e21,
];

const HOSTILE_OTHERS: readonly unknown[] = [null, true, false, [], {}, [null], [[]], { '': null }];

/** Keys that are special in JavaScript or otherwise odd. */
const HOSTILE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', 'zzz', '', '\u0000', '\ud800', 'a'.repeat(300)];

/** Path segments for a path parameter. */
export const HOSTILE_SEGMENTS: readonly string[] = [
  '%E0%A4%A', '%', '%zz', '%00', '%ED%A0%80', '%C0%AF', '%FF%FE', '%F0%9F%92%A5', '%20', '%2e%2e', '-1', '0', '1e3', '1.5', '0x10',
  '99999999999999999999', '9007199254740993', 'abc', 'x'.repeat(3000), '__proto__', 'constructor', '%5B%5D', '%7B%7D', 'null',
];

/** Malformed or odd %-escapes and bytes for queries and forms. */
const RAW_FORM_PIECES = ['%E0%A4%A', '%', '%zz', '%00', '%ED%A0%80', '%FF', '%C0%AF', '+', '&&&', '=', '==', '%26', '%3D', '%0A'];

const INVALID_UTF8: readonly number[][] = [[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82]];

const CONTENT_TYPES: ReadonlyArray<string | undefined> = [
  undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1',
  'application/problem+json', 'APPLICATION/JSON', 'application/jsonx', 'application/xml', 'application/json, text/plain',
];

type Path = Array<string | number>;

function nodePaths(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (Array.isArray(value)) {
    value.forEach((v, i) => nodePaths(v, [...prefix, i], out));
  } else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      nodePaths(v, [...prefix, k], out);
    }
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function getAt(root: unknown, path: Path): unknown {
  let node = root;
  for (const p of path) {
    node = (node as Record<string | number, unknown>)[p];
  }
  return node;
}

/** Set as an own enumerable property (so `__proto__` becomes a key, as JSON text would make it). */
function define(container: object, key: string | number, value: unknown): void {
  Object.defineProperty(container, key, { value, enumerable: true, writable: true, configurable: true });
}

function nest(rng: Rng, depth: number): unknown {
  const inner = pick(rng, ['leaf', 1, null, {}]);
  let value: unknown = inner;
  const arrays = chance(rng, 0.5);
  for (let i = 0; i < depth; i++) {
    value = arrays ? [value] : { a: value };
  }
  return value;
}

function hostileValue(rng: Rng): unknown {
  const r = rng();
  if (r < 0.45) return pick(rng, HOSTILE_STRINGS);
  if (r < 0.8) return pick(rng, HOSTILE_NUMBERS);
  if (r < 0.95) return structuredClone(pick(rng, HOSTILE_OTHERS));
  return nest(rng, int(rng, 20, 40));
}

function corruptString(rng: Rng, s: string): string {
  const r = rng();
  if (r < 0.7) {
    const at = int(rng, 0, s.length);
    return s.slice(0, at) + pick(rng, ['\u0000', '\ud800', '\udfff', '\udc00\ud800', '\u0001', '\uffff', '\u0000\u0000']) + s.slice(at);
  }
  if (r < 0.85) return s.repeat(Math.ceil(3000 / Math.max(1, s.length)));
  return pick(rng, HOSTILE_STRINGS);
}

/** One to three structural mutations of a JSON value. */
export function mutateJson(rng: Rng, value: unknown, notes: string[]): unknown {
  let root = structuredClone(value);
  const count = int(rng, 1, 3);
  for (let n = 0; n < count; n++) {
    const paths = nodePaths(root);
    // Leaves of strings are where NUL and surrogates matter most: favour them.
    const strings = paths.filter((p) => typeof getAt(root, p) === 'string');
    const path = strings.length && chance(rng, 0.35) ? pick(rng, strings) : pick(rng, paths);
    const node = getAt(root, path);
    const label = path.join('.') || '(root)';
    let replacement: unknown;
    const op = rng();
    if (typeof node === 'string' && op < 0.4) {
      replacement = corruptString(rng, node);
      notes.push(`corrupt string ${label}`);
    } else if (isObject(node) && op < 0.55) {
      const key = pick(rng, HOSTILE_KEYS);
      define(node, key, hostileValue(rng));
      notes.push(`add key ${JSON.stringify(key)} at ${label}`);
      continue;
    } else if (path.length > 0 && op < 0.65) {
      const parent = getAt(root, path.slice(0, -1)) as Record<string | number, unknown>;
      const last = path[path.length - 1]!;
      if (Array.isArray(parent)) {
        parent.splice(last as number, 1);
      } else {
        delete parent[last];
      }
      notes.push(`drop ${label}`);
      continue;
    } else if (op < 0.75) {
      // Arrays where objects belong and the reverse.
      replacement = Array.isArray(node) ? Object.fromEntries(node.map((v, i) => [String(i), v])) : isObject(node) ? [node] : pick(rng, [[node], { value: node }]);
      notes.push(`swap container at ${label}`);
    } else if (op < 0.8) {
      replacement = nest(rng, int(rng, 20, 40));
      notes.push(`deep nesting at ${label}`);
    } else {
      replacement = hostileValue(rng);
      notes.push(`replace ${label} with ${short(replacement)}`);
    }
    if (path.length === 0) {
      root = replacement;
    } else {
      define(getAt(root, path.slice(0, -1)) as object, path[path.length - 1]!, replacement);
    }
  }
  return root;
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 40)}…(${text.length})` : text;
}

/** Byte-level damage to a JSON text. */
export function mutateJsonText(rng: Rng, text: string, notes: string[]): Buffer {
  const r = rng();
  if (r < 0.12) {
    notes.push('truncated');
    return Buffer.from(text.slice(0, int(rng, 0, Math.max(0, text.length - 1))));
  }
  if (r < 0.17) {
    notes.push('empty body');
    return Buffer.alloc(0);
  }
  if (r < 0.35) {
    const bytes = Buffer.from(text);
    const at = int(rng, 0, bytes.length);
    const bad = Buffer.from(pick(rng, INVALID_UTF8));
    notes.push(`invalid UTF-8 ${bad.toString('hex')} at byte ${at}`);
    return Buffer.concat([bytes.subarray(0, at), bad, bytes.subarray(at)]);
  }
  if (r < 0.55) {
    const keys = [...text.matchAll(/"((?:[^"\\]|\\.)*)":/g)];
    if (keys.length) {
      const m = pick(rng, keys);
      notes.push(`duplicate key ${m[1]}`);
      return Buffer.from(`${text.slice(0, m.index)}"${m[1]}":null,${text.slice(m.index)}`);
    }
  }
  if (r < 0.68) {
    const numbers = [...text.matchAll(/(?<=[:[,])-?\d[\d.eE+-]*/g)];
    if (numbers.length) {
      const m = pick(rng, numbers);
      const literal = pick(rng, ['1e400', '-1e400', '123456789012345678901234567890', '1.00000000000000000000001', '-0', '0e-99999', '1E+308', '9'.repeat(400)]);
      notes.push(`number literal ${literal.slice(0, 20)}`);
      return Buffer.from(text.slice(0, m.index) + literal + text.slice(m.index! + m[0].length));
    }
  }
  if (r < 0.8) {
    const quotes = [...text.matchAll(/"(?=[^"]*"\s*[,}\]])/g)];
    if (quotes.length) {
      const m = pick(rng, quotes);
      const escape = pick(rng, ['\\u0000', '\\ud800', '\\udc00\\ud800', '\\x41', '\\u00', '\\', '\\uDFFF', '\\u0000\\u0000']);
      notes.push(`escape ${escape} in a string`);
      return Buffer.from(text.slice(0, m.index! + 1) + escape + text.slice(m.index! + 1));
    }
  }
  if (r < 0.86) {
    notes.push('BOM');
    return Buffer.from(`\ufeff${text}`);
  }
  if (r < 0.97) {
    const junk = pick(rng, [',', '}', ']', 'x', '\u0000', '//c', '{}', ' '.repeat(1000)]);
    notes.push(`junk ${JSON.stringify(junk.slice(0, 5))}`);
    return Buffer.from(chance(rng, 0.5) ? text + junk : junk + text);
  }
  notes.push('body over the size cap');
  return Buffer.from(`${text.slice(0, -1)},"pad":"${'y'.repeat(300 * 1024)}"${text.slice(-1)}`);
}

/** Percent-encode UTF-8 bytes (lone surrogates become U+FFFD, as any client's encoder would make them). */
function encodeComponent(s: string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function encodeForm(fields: Record<string, string>): string {
  return Object.entries(fields).map(([k, v]) => `${encodeComponent(k)}=${encodeComponent(v)}`).join('&');
}

function mutateFields(rng: Rng, fields: Record<string, string>, notes: string[], protect: string[] = []): Record<string, string> {
  const out = { ...fields };
  const names = Object.keys(out).filter((n) => !protect.includes(n));
  const r = rng();
  if (r < 0.55 && names.length) {
    const name = pick(rng, names);
    out[name] = chance(rng, 0.5) ? corruptString(rng, out[name]!) : pick(rng, HOSTILE_STRINGS);
    notes.push(`field ${name} = ${short(out[name])}`);
  } else if (r < 0.7 && names.length) {
    const name = pick(rng, names);
    delete out[name];
    notes.push(`drop field ${name}`);
  } else {
    const name = pick(rng, ['__proto__', 'constructor', 'prototype', 'zzz', 'apikey', 'customID', 'time', 'number', 'body', '']);
    define(out, name, pick(rng, HOSTILE_STRINGS));
    notes.push(`add field ${JSON.stringify(name)}`);
  }
  return out;
}

/** Form or query text, sometimes with raw damage (malformed escapes, duplicates, invalid bytes). */
function formText(rng: Rng, fields: Record<string, string>, notes: string[]): Buffer {
  let text = encodeForm(fields);
  const r = rng();
  if (r < 0.3) {
    const at = int(rng, 0, text.length);
    const piece = pick(rng, RAW_FORM_PIECES);
    notes.push(`raw ${piece} at ${at}`);
    text = text.slice(0, at) + piece + text.slice(at);
  } else if (r < 0.4 && text.length) {
    const first = text.split('&')[0]!;
    notes.push('duplicate field');
    text = `${text}&${first}`;
  } else if (r < 0.45) {
    notes.push('truncated');
    text = text.slice(0, int(rng, 0, text.length));
  } else if (r < 0.5) {
    const bytes = Buffer.from(text);
    const at = int(rng, 0, bytes.length);
    notes.push('invalid UTF-8 in form');
    return Buffer.concat([bytes.subarray(0, at), Buffer.from(pick(rng, INVALID_UTF8)), bytes.subarray(at)]);
  }
  return Buffer.from(text);
}

/** String damage to an XML document. */
function mutateXml(rng: Rng, xml: string, notes: string[]): string {
  const r = rng();
  const at = int(rng, 0, xml.length);
  if (r < 0.35) {
    const piece = pick(rng, [
      '\u0000', '&#0;', '&#xD800;', '&#x1F4A5;', '&a;', '<![CDATA[', ']]>', '<!DOCTYPE x [<!ENTITY a "aaaaaaaa">]>', '<!-- -->', '<?pi?>',
      '<Number>9999999999999999999999999999999999999</Number>', '<Number>\u0000</Number>', '<Number>&#0;</Number>', '\ud800', '<', '>', '&',
      '"', 'Type="direct"', ' Sender="&#0;"', '<Message Type="Text">again</Message>', LONG,
    ]);
    notes.push(`xml insert ${short(piece)} at ${at}`);
    return xml.slice(0, at) + piece + xml.slice(at);
  }
  if (r < 0.45) {
    notes.push('xml truncated');
    return xml.slice(0, at);
  }
  if (r < 0.55) {
    notes.push('xml deep nesting');
    const depth = int(rng, 100, 3000);
    return xml.replace('<Message', `${'<a>'.repeat(depth)}${'</a>'.repeat(depth)}<Message`);
  }
  if (r < 0.65) {
    notes.push('xml many numbers');
    return xml.replace('<NumbersList>', `<NumbersList>${'<Number>420777123456</Number>'.repeat(int(rng, 11, 1200))}`);
  }
  if (r < 0.8) {
    const value = pick(rng, HOSTILE_STRINGS).replace(/[<&"]/g, '');
    notes.push(`xml Sender ${short(value)}`);
    return xml.replace(/Sender="[^"]*"/, `Sender="${value}"`);
  }
  if (r < 0.9) {
    const value = pick(rng, HOSTILE_STRINGS).replace(/[<&]/g, '');
    notes.push(`xml text ${short(value)}`);
    return xml.replace(/(<Message Type="Text">)[^<]*/, `$1${value}`);
  }
  notes.push('xml Type');
  return xml.replace(/Request Type="[^"]*"/, `Request Type="${pick(rng, ['', 'HIGH', 'sms', 'lowcost ', '\u0000', 'direct'])}"`);
}

function fillPath(rng: Rng, path: string, notes: string[], hostile: boolean): string {
  return path.replace(/\{([^}]*)\}/g, (_, value: string) => {
    if (hostile && chance(rng, 0.5)) {
      const segment = pick(rng, HOSTILE_SEGMENTS);
      notes.push(`path parameter ${short(segment)}`);
      return segment;
    }
    return encodeComponent(value);
  });
}

/** A hostile request from a template: usually one kind of damage, sometimes two. */
export function mutate(rng: Rng, t: Template): HostileRequest {
  const notes: string[] = [];
  const headers = { ...t.headers };
  const hasParams = t.path.includes('{');
  let path = fillPath(rng, t.path, notes, hasParams && chance(rng, 0.25));
  if (!hasParams && chance(rng, 0.03)) {
    const at = int(rng, 1, path.length);
    path = path.slice(0, at) + pick(rng, ['%E0%A4%A', '%zz', '%00', '%']) + path.slice(at);
    notes.push('malformed escape in a fixed path');
  }
  if (t.query) {
    const fields = chance(rng, 0.7) ? mutateFields(rng, t.query, notes, t.query.apikey ? ['apikey'] : []) : t.query;
    path += `?${formText(rng, fields, notes).toString('latin1').replace(/[^\x21-\x7e]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)}`;
  }
  let body: Buffer | undefined;
  switch (t.body.kind) {
    case 'none':
      if (chance(rng, 0.05)) {
        body = Buffer.from('{"unexpected": "body"}');
        headers['content-type'] = 'application/json';
        notes.push('a body where none is read');
      }
      break;
    case 'json': {
      const structural = chance(rng, 0.7);
      const value = structural ? mutateJson(rng, t.body.value, notes) : t.body.value;
      const text = JSON.stringify(value) ?? 'null';
      body = !structural || chance(rng, 0.15) ? mutateJsonText(rng, text, notes) : Buffer.from(text);
      headers['content-type'] = 'application/json';
      break;
    }
    case 'form':
      body = formText(rng, mutateFields(rng, t.body.fields, notes), notes);
      headers['content-type'] = 'application/x-www-form-urlencoded';
      break;
    case 'xml': {
      const fields = { ...t.body.fields };
      if (chance(rng, 0.75)) {
        fields.XMLDATA = mutateXml(rng, fields.XMLDATA!, notes);
      }
      body = formText(rng, chance(rng, 0.2) ? mutateFields(rng, fields, notes, ['apikey']) : fields, notes);
      headers['content-type'] = 'application/x-www-form-urlencoded';
      break;
    }
  }
  if (body !== undefined && chance(rng, 0.06)) {
    const type = pick(rng, CONTENT_TYPES);
    notes.push(`content-type ${type ?? '(none)'}`);
    if (type === undefined) {
      delete headers['content-type'];
    } else {
      headers['content-type'] = type;
    }
  }
  return { family: t.family, template: t.name, notes, method: t.method, path, headers, ...(body !== undefined && { body }) };
}
