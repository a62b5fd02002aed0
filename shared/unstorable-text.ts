/**
 * Text Postgres cannot store: U+0000 (refused in `text` and `jsonb`) and unpaired UTF-16
 * surrogates (not UTF-8 at all: the driver would silently turn them into U+FFFD, and `jsonb`
 * refuses their escapes). Every input that reaches a text column is checked with this first, so
 * such a value is a 400 naming its field rather than a database error.
 */
export const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const childPath = (path: string, name: string) => (path ? `${path}.${name}` : name);

/**
 * The first string (or property name) in `value` that cannot be stored, as `<field path>: <what
 * is wrong>`, or null. `path` names `value` itself ('' for a whole body).
 */
export function findUnstorable(value: unknown, path: string): string | null {
  if (typeof value === 'string') {
    return UNSTORABLE.test(value) ? `${path || 'body'}: must not contain NUL characters or unpaired surrogates` : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = findUnstorable(value[i], `${path}[${i}]`);
      if (problem) {
        return problem;
      }
    }
    return null;
  }
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    for (const [name, inner] of Object.entries(value)) {
      if (UNSTORABLE.test(name)) {
        return `${path || 'body'}: property names must not contain NUL characters or unpaired surrogates`;
      }
      const problem = findUnstorable(inner, childPath(path, name));
      if (problem) {
        return problem;
      }
    }
  }
  return null;
}
