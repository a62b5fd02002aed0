/**
 * JSON.parse plus the checks it skips: duplicate keys (JSON.parse silently keeps the last one,
 * so a client could smuggle a second `to` past a reviewer) and nesting depth. The native parser
 * runs first (fast, good error messages); the scan then walks the already-valid text once.
 */
export type StrictJsonResult = { ok: true; value: unknown } | { ok: false; message: string };

export const MAX_JSON_DEPTH = 32;

export function parseStrictJson(text: string, maxDepth = MAX_JSON_DEPTH): StrictJsonResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `Invalid JSON: ${(err as Error).message}` };
  }
  const problem = scan(text, maxDepth);
  return problem ? { ok: false, message: problem } : { ok: true, value };
}

const QUOTE = 34;
const BACKSLASH = 92;

/** Walk valid JSON text; return a message naming the first duplicate key or depth excess. */
function scan(text: string, maxDepth: number): string | null {
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
        keys.pop();
        path.pop();
        indexes.pop();
        expectKey = false;
        break;
      case 44: // ,
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
