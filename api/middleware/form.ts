/**
 * `application/x-www-form-urlencoded` text (a form body, or a URL's query) decoded strictly.
 *
 * The WHATWG algorithm, on bytes: split on `&`, then on the first `=`, `+` is a space, `%XX` a
 * byte (a `%` not followed by two hex digits stays as it is), and the bytes of each name and value
 * are then read in the form's character set. Where that reading fails (bytes that are not UTF-8,
 * say `%FD` from a windows-1250 client that did not say so), `URLSearchParams` and Node's
 * `querystring` put U+FFFD in their place without a word; such text was sent to handsets, and as
 * UCS-2 it cost more. Here the field is named instead, so the caller can refuse the request.
 *
 * The character set is UTF-8 unless the request names another one (`charset=` of its
 * Content-Type) that `TextDecoder` knows and that writes ASCII as ASCII; UTF-16 does not, and
 * is refused.
 */
import { TextDecoder } from 'node:util';

export type FormDecoder = TextDecoder;

export interface ParsedForm {
  /** Name → its first value (later values of a name are ignored). */
  values: Record<string, string>;
  /** The first name (or `(field name)`) whose bytes were not text in the character set, else null. */
  badField: string | null;
}

/** The Content-Type's `charset` parameter, lower-cased, or null when it names none. */
export function charsetOf(contentType: string | undefined): string | null {
  for (const param of (contentType ?? '').split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq > 0 && param.slice(0, eq).trim().toLowerCase() === 'charset') {
      const value = param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
      return value === '' ? null : value;
    }
  }
  return null;
}

/**
 * A strict decoder for the named character set (UTF-8 when null), or a reason it cannot be used
 * for a form.
 */
export function formDecoder(charset: string | null): FormDecoder | string {
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset ?? 'utf-8', { fatal: true });
  } catch {
    return `charset ${charset} is not supported; send the form in UTF-8`;
  }
  if (decoder.encoding.startsWith('utf-16')) {
    return `charset ${charset} is not supported for forms; send the form in UTF-8`;
  }
  return decoder;
}

const PERCENT = 0x25;
const PLUS = 0x2b;
const AMP = 0x26;
const EQUALS = 0x3d;

function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  return -1;
}

/** Bytes `raw[start, end)` with `+` and `%XX` decoded. */
function unescape(raw: Uint8Array, start: number, end: number): Uint8Array {
  const out = new Uint8Array(end - start);
  let n = 0;
  for (let i = start; i < end; i++) {
    const b = raw[i]!;
    if (b === PLUS) {
      out[n++] = 0x20;
    } else if (b === PERCENT && i + 2 < end && hexValue(raw[i + 1]!) >= 0 && hexValue(raw[i + 2]!) >= 0) {
      out[n++] = hexValue(raw[i + 1]!) * 16 + hexValue(raw[i + 2]!);
      i += 2;
    } else {
      out[n++] = b;
    }
  }
  return out.subarray(0, n);
}

/** Parses form-encoded bytes (see the top of this file). */
export function parseForm(raw: Uint8Array, decoder: FormDecoder): ParsedForm {
  const values: Record<string, string> = Object.create(null) as Record<string, string>;
  let badField: string | null = null;
  const read = (bytes: Uint8Array): string | null => {
    try {
      return decoder.decode(bytes);
    } catch {
      return null;
    }
  };
  let start = 0;
  while (start <= raw.length) {
    let end = raw.indexOf(AMP, start);
    if (end < 0) end = raw.length;
    if (end > start) {
      let eq = raw.indexOf(EQUALS, start);
      if (eq < 0 || eq > end) eq = end;
      const name = read(unescape(raw, start, eq));
      const value = read(unescape(raw, Math.min(eq + 1, end), end));
      if (name === null || value === null) {
        badField ??= name ?? '(field name)';
      } else if (!(name in values)) {
        values[name] = value;
      }
    }
    start = end + 1;
  }
  return { values, badField };
}
