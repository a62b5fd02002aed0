/**
 * JSON.parse plus the checks it skips: duplicate keys (JSON.parse silently keeps the last one,
 * so a client could smuggle a second `to` past a reviewer) and nesting depth. The native parser
 * runs first (fast, good error messages); the scan then walks the already-valid text once.
 *
 * A `__proto__` key is kept as the own property JSON.parse makes of it, on an object whose
 * prototype is then null: copied with `Object.assign` or `{...}` into an ordinary object (as Joi
 * does when it validates) it would otherwise set that copy's prototype and vanish, so a schema
 * could never refuse it like any other unknown key.
 */
export type StrictJsonResult =
  | { ok: true; value: unknown; /** Raw text of each message object's `payload` (by array index; [0] for an object). */ payloads: Array<string | undefined> }
  | { ok: false; message: string };

export const MAX_JSON_DEPTH = 32;

export function parseStrictJson(text: string, maxDepth = MAX_JSON_DEPTH): StrictJsonResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `Invalid JSON: ${(err as Error).message}` };
  }
  const payloads: Array<string | undefined> = [];
  const found = { proto: false };
  const problem = scan(text, maxDepth, payloads, found);
  if (problem) {
    return { ok: false, message: problem };
  }
  if (found.proto) {
    keepProtoKeys(value);
  }
  return { ok: true, value, payloads };
}

/** Give every object holding an own `__proto__` key a null prototype, so that copies keep the key. */
function keepProtoKeys(value: unknown): void {
  if (value === null || typeof value !== 'object') {
    return;
  }
  if (Array.isArray(value)) {
    value.forEach(keepProtoKeys);
    return;
  }
  if (Object.prototype.hasOwnProperty.call(value, '__proto__')) {
    Object.setPrototypeOf(value, null);
  }
  for (const inner of Object.values(value)) {
    keepProtoKeys(inner);
  }
}

const QUOTE = 34;
const BACKSLASH = 92;

/**
 * Walk valid JSON text; return a message naming the first duplicate key or depth excess. On the
 * way, record the exact text of `payload` in the message object(s) (the top-level object, or each
 * object of a top-level array): the sending API returns payloads byte for byte, which a
 * parse-and-stringify round trip would not (integer-like keys move, `1.0` becomes `1`).
 */
function scan(text: string, maxDepth: number, payloads: Array<string | undefined>, found: { proto: boolean }): string | null {
  const messageDepth = text.trimStart().startsWith('[') ? 2 : 1;
  let capture: { start: number; index: number } | null = null;
  const endCapture = (end: number) => {
    if (capture) {
      payloads[capture.index] = text.slice(capture.start, end).trim();
      capture = null;
    }
  };
  // One frame per open container: the keys seen (objects) and the path label for messages.
  const keys: Array<Set<string> | null> = [];
  const path: string[] = [];
  const indexes: number[] = [];
  let expectKey = false;
  let lastKey = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i + 1;
      let escaped = false;
      i++;
      while (i < text.length) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) {
          escaped = true;
          i += 2;
          continue;
        }
        if (d === QUOTE) {
          break;
        }
        i++;
      }
      if (expectKey) {
        const raw = text.slice(start, i);
        const key = escaped ? (JSON.parse(`"${raw}"`) as string) : raw;
        const seen = keys[keys.length - 1];
        if (seen) {
          if (seen.has(key)) {
            return `Duplicate key "${key}" at ${pathLabel(path, indexes)}`;
          }
          seen.add(key);
        }
        lastKey = key;
        expectKey = false;
        if (key === '__proto__') {
          found.proto = true;
        }
        if (key === 'payload' && keys.length === messageDepth) {
          const colon = text.indexOf(':', i + 1);
          capture = { start: colon + 1, index: messageDepth === 2 ? (indexes[0] ?? 0) : 0 };
          i = colon;
        }
      }
      continue;
    }
    switch (c) {
      case 123: // {
      case 91: // [
        if (keys.length >= maxDepth) {
          return `JSON nested too deeply (max depth ${maxDepth})`;
        }
        path.push(keys.length === 0 ? '' : currentLabel(keys, lastKey, indexes));
        keys.push(c === 123 ? new Set() : null);
        indexes.push(0);
        expectKey = c === 123;
        break;
      case 125: // }
      case 93: // ]
        if (keys.length === messageDepth) {
          endCapture(i);
        }
        keys.pop();
        path.pop();
        indexes.pop();
        expectKey = false;
        break;
      case 44: // ,
        if (keys.length === messageDepth) {
          endCapture(i);
        }
        if (keys[keys.length - 1]) {
          expectKey = true;
        } else if (indexes.length) {
          indexes[indexes.length - 1]!++;
        }
        break;
      default:
        break;
    }
  }
  return null;
}

function currentLabel(keys: Array<Set<string> | null>, lastKey: string, indexes: number[]): string {
  return keys[keys.length - 1] ? lastKey : `[${indexes[indexes.length - 1] ?? 0}]`;
}

function pathLabel(path: string[], _indexes: number[]): string {
  const label = path.filter((p) => p !== '').reduce((acc, p) => (p.startsWith('[') ? acc + p : acc ? `${acc}.${p}` : p), '');
  return label || 'the top level';
}
