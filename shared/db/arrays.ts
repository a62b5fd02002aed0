/**
 * Array parameters written as Postgres array literals (`{1,2,NULL}`, `{"a","b\"c"}`) by us
 * rather than by node-postgres. The hot statements pass their batches as arrays to
 * `unnest($n::type[], ...)`, and pg serialises every element of such an array through
 * `prepareValue` and `escapeElement`: two regex replaces and quoting per element, numbers
 * included, and Dates through its field-by-field local-time formatter, a visible share of the
 * busiest worker's CPU (docs/benchmarks.md). A string
 * parameter is sent as it is, so these functions are all the work a batch costs; the `::type[]`
 * cast in the statement reads the literal exactly as it read pg's.
 *
 * Elements that are `undefined` are written NULL, as pg does.
 */

const NEEDS_ESCAPE = /[\\"]/;
const ESCAPE = /[\\"]/g;

/**
 * For `::text[]`, `::json[]`, `::jsonb[]`. Every element is quoted: unquoted, the array parser
 * would trim surrounding spaces and read `NULL` as a null. Inside quotes only `\` and `"` are
 * special, and most strings contain neither, so one test decides whether to replace at all.
 */
export function textArray(values: ReadonlyArray<string | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) {
      out += ',';
    }
    if (v == null) {
      out += 'NULL';
    } else if (NEEDS_ESCAPE.test(v)) {
      out += `"${v.replace(ESCAPE, '\\$&')}"`;
    } else {
      out += `"${v}"`;
    }
  }
  return out + '}';
}

/**
 * For `::bigint[]`, `::int[]`, `::smallint[]`, `::numeric[]`: a number's text never needs
 * quoting. It is the text pg sends for a number too (`String(n)`), so ids (below 2^53 here) and
 * prices arrive with the same digits.
 */
export function numberArray(values: ReadonlyArray<number | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) {
      out += ',';
    }
    out += v == null ? 'NULL' : String(v);
  }
  return out + '}';
}

/** For `::boolean[]`. */
export function boolArray(values: ReadonlyArray<boolean | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) {
      out += ',';
    }
    out += v == null ? 'NULL' : v ? 't' : 'f';
  }
  return out + '}';
}

/**
 * For `::timestamptz[]`: a Date or epoch milliseconds as ISO 8601 UTC with milliseconds, which
 * names the same instant as pg's local-time text with offset. Years 1 to 9999 only (the ISO text
 * of other years is not Postgres input); an invalid Date throws here instead of failing in
 * Postgres.
 */
export function timestampArray(values: ReadonlyArray<Date | number | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (i > 0) {
      out += ',';
    }
    out += v == null ? 'NULL' : isoUtc(typeof v === 'number' ? Math.trunc(v) : v.getTime());
  }
  return out + '}';
}

const DAY_MS = 86_400_000;
let cachedDay = NaN;
let cachedDayPrefix = '';
const pad2 = (n: number) => (n < 10 ? '0' : '') + n;
const pad3 = (n: number) => (n < 10 ? '00' : n < 100 ? '0' : '') + n;

/**
 * `new Date(ms).toISOString()`, about 3 times faster: that call took half of this module's time
 * in a status batch. The times of a batch nearly all fall on one day, so only the date part comes
 * from toISOString (which also throws for an invalid time), once per day seen.
 */
function isoUtc(ms: number): string {
  const day = Math.floor(ms / DAY_MS);
  if (day !== cachedDay) {
    cachedDayPrefix = new Date(day * DAY_MS).toISOString().slice(0, -13);
    cachedDay = day;
  }
  let rest = ms - day * DAY_MS;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${cachedDayPrefix}${pad2(h)}:${pad2(m)}:${pad2(s)}.${pad3(rest - s * 1000)}Z`;
}

/**
 * A batch's rows from its array parameters, for a statement's FROM (the caller names it):
 *
 *   `FROM ${arrayRows({ id: '$1::bigint[]', state: '$2::text[]' })} AS u`
 *   → `FROM (SELECT unnest($1::bigint[]) AS id, unnest($2::text[]) AS state) AS u`
 *
 * Row i holds element i of every array, in array order (set-returning functions in one select
 * list run in lockstep; a shorter array gives NULLs, as `unnest($1, $2)` does). Not
 * `unnest($1, $2) AS u(id, state)`: a function in FROM is first materialised into a tuplestore,
 * whose memory is allocated and returned to the system on every run, and that cost 2.5 times the
 * backend CPU of the whole insert for a batch of 1,000 rows (docs/benchmarks.md, "Batches without
 * a function in FROM"). The subquery is never flattened into its statement (Postgres keeps a
 * subquery whose select list returns sets), and nothing in it reorders rows.
 *
 * No ordinal column (`generate_series(1, cardinality(…))` beside them): the planner takes a
 * set-returning function of unknown arguments for 1,000 rows where it takes these for 10, and a
 * generic plan built on that estimate hashed a whole table where it looked up the batch's rows.
 */
export function arrayRows(columns: Readonly<Record<string, string>>): string {
  let list = '';
  for (const [name, array] of Object.entries(columns)) {
    list += `${list === '' ? '' : ', '}unnest(${array}) AS ${name}`;
  }
  if (list === '') throw new Error('arrayRows needs at least one column');
  return `(SELECT ${list})`;
}
