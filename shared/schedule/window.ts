/**
 * Scheduled sends and delivery windows (product decision D2). Pure functions: no I/O and no clock
 * reads; `now` / `at` are always parameters.
 *
 * ## `datetime` (message field) — {@link resolveSendAt}
 * - Accepted grammar (ISO 8601 extended format / RFC 3339):
 *   `YYYY-MM-DD(T|t| )HH:MM[:SS[(.|,)fraction]][Z|z|±HH|±HHMM|±HH:MM]`.
 *   Without a zone designator the time is UTC. Fractions beyond milliseconds are truncated.
 *   Calendar-checked (2026-02-30 is rejected); hour 24 and leap second 60 are rejected.
 * - Date-only values (`2026-05-01`) are REJECTED: "midnight UTC" is rarely what a sender means
 *   (it is the previous evening in the Americas), so the caller must state a time.
 * - Basic format (`20260501T1000Z`), week dates, ordinal dates and surrounding whitespace are
 *   rejected.
 * - `sendAt - now <= 60 s` (including anything in the past): send now (`sendAt: null`).
 * - `60 s < sendAt - now <= 365 × 24 h`: scheduled at that instant.
 * - more than 365 × 24 h ahead: rejected.
 *
 * ## `delivery_time` — {@link validateDeliveryWindow}, {@link isInsideWindow}, {@link nextSendInstant}
 * - `days`: lower-case `monday`..`sunday`; missing = every day; an empty array is rejected (it
 *   would never allow a send). Duplicates are harmless and accepted.
 * - `start`/`end`: `HH:MM`, exactly two digits each, hours 00–23, minutes 00–59; both or neither.
 *   `start` is inclusive, `end` exclusive. Neither given: the whole calendar day (00:00–24:00 in
 *   `tz`) of every allowed day.
 * - `start == end`: treated exactly like "no start/end": the whole calendar day of each allowed day.
 * - `start > end`: the window wraps past midnight and BELONGS TO THE DAY IT STARTS ON. With
 *   `days: ['monday'], start 22:00, end 06:00` the window runs Monday 22:00 → Tuesday 06:00, so
 *   Tuesday 02:00 is inside (Monday's window) while Monday 02:00 is outside (that would be
 *   Sunday's window, and Sunday is not allowed).
 * - `tz`: IANA zone name (`Europe/Prague`, `UTC`, `Etc/GMT+3`, ...), default `UTC`. Offset strings
 *   such as `+05:30` are not zone names and are rejected. Lookups are case-insensitive (ECMA-402).
 *
 * ## Wall time → instant (DST)
 * Every boundary (start, end, midnight) is a local wall time on a given date in `tz`, turned into an
 * instant by one rule, used for starts and ends alike:
 * - Gap (spring forward, wall time does not exist, e.g. Europe/Prague 2026-03-29 02:00–03:00):
 *   the FIRST EXISTING INSTANT AFTER THE GAP, i.e. the transition instant (03:00 local = 01:00Z).
 *   So a 02:30 start opens at 03:00 CEST, and a 02:30 end closes at 03:00 CEST. (Luxon itself
 *   would shift by the gap length to 03:30; we do not.)
 * - Fold (fall back, wall time occurs twice, e.g. Europe/Prague 2026-10-25 02:00–03:00): the FIRST
 *   occurrence (the earlier instant, still on summer time): 02:30 → 00:30Z. (Luxon itself picks
 *   the later offset, 01:30Z; we do not.) Because ends follow the same rule, a window never
 *   re-opens during the repeated hour.
 * - If a gap swallows a whole window on some day (e.g. `02:00–03:00` on 2026-03-29 in Prague; start
 *   and end both map to the transition instant) the window is not dropped: it opens at the first
 *   instant after the gap and stays open for its nominal wall-clock length (here 03:00–04:00 CEST).
 *   This keeps every allowed day's window non-empty, which bounds the search below.
 *
 * ## Search
 * {@link nextSendInstant} inspects at most the allowed days from two local days before `at` to eight
 * local days after it (11 candidate days), so it always terminates; per candidate day it costs a
 * handful of zone-offset lookups (luxon's cached `Intl.DateTimeFormat`), and wall-time → instant
 * results are memoised per zone. Zone names are validated once and cached (both caches bounded).
 */
import { IANAZone } from 'luxon';

export interface DeliveryWindow {
  days?: string[];
  start?: string;
  end?: string;
  tz?: string;
}

export type WindowCheck = { ok: true } | { ok: false; field: string; message: string };

export type DatetimeCheck = { ok: true; sendAt: Date | null } | { ok: false; message: string };

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Sends due within this many ms of `now` (or in the past) go out immediately. */
export const SEND_NOW_THRESHOLD_MS = 60 * SECOND;
/** How far ahead a `datetime` may be. */
export const MAX_SCHEDULE_AHEAD_MS = 365 * DAY;

// ---------------------------------------------------------------------------------------------
// datetime
// ---------------------------------------------------------------------------------------------

const DATETIME_RE =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$/;
const DATE_ONLY_RE = /^\d{4}-\d{2}-\d{2}$/;

function daysInMonth(year: number, month: number): number {
  // month is 1-based; day 0 of the next month is the last day of this one.
  const d = new Date(0);
  d.setUTCFullYear(year, month, 0);
  return d.getUTCDate();
}

/** Parse an ISO 8601 date-time (grammar in the module comment) to epoch ms, or null. */
function parseIsoDateTime(s: string): number | null {
  const m = DATETIME_RE.exec(s);
  if (m === null) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  const millis = m[7] === undefined ? 0 : Number(m[7].padEnd(3, '0').slice(0, 3));
  if (month < 1 || month > 12) return null;
  if (day < 1 || day > daysInMonth(year, month)) return null;
  if (hour > 23 || minute > 59 || second > 59) return null;
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = m[11] === undefined ? 0 : Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const d = new Date(0);
  // setUTCFullYear rather than Date.UTC: Date.UTC maps years 0..99 to 1900..1999.
  d.setUTCFullYear(year, month - 1, day);
  d.setUTCHours(hour, minute, second, millis);
  return d.getTime() - offsetMinutes * MINUTE;
}

/**
 * Resolve a message's `datetime` against `now`: `sendAt: null` = send now, a Date = schedule at that
 * instant; `ok: false` for malformed values and values more than 365 days ahead.
 */
export function resolveSendAt(datetime: string, now: Date): DatetimeCheck {
  const nowMs = now.getTime();
  if (Number.isNaN(nowMs)) throw new RangeError('resolveSendAt: now is an invalid Date');
  if (typeof datetime !== 'string') {
    return { ok: false, message: 'datetime must be an ISO 8601 string' };
  }
  const s = datetime;
  if (DATE_ONLY_RE.test(s)) {
    return {
      ok: false,
      message: 'datetime must include a time of day, e.g. 2026-05-01T09:00:00Z (date-only values are not accepted)',
    };
  }
  const at = s.length <= 64 ? parseIsoDateTime(s) : null;
  if (at === null || !Number.isFinite(at)) {
    return {
      ok: false,
      message: 'datetime must be an ISO 8601 date-time such as 2026-05-01T09:00:00Z or 2026-05-01T11:00:00+02:00',
    };
  }
  const ahead = at - nowMs;
  if (ahead <= SEND_NOW_THRESHOLD_MS) return { ok: true, sendAt: null };
  if (ahead > MAX_SCHEDULE_AHEAD_MS) {
    return { ok: false, message: 'datetime must not be more than 365 days in the future' };
  }
  return { ok: true, sendAt: new Date(at) };
}

// ---------------------------------------------------------------------------------------------
// delivery window: validation / compilation
// ---------------------------------------------------------------------------------------------

/** Day names → JS weekday numbers (0 = Sunday), matching {@link weekdayOfDayNumber}. */
const DAY_INDEX: ReadonlyMap<string, number> = new Map([
  ['sunday', 0],
  ['monday', 1],
  ['tuesday', 2],
  ['wednesday', 3],
  ['thursday', 4],
  ['friday', 5],
  ['saturday', 6],
]);
const ALL_DAYS_MASK = 0b1111111;
const DAY_NAMES_TEXT = 'monday, tuesday, wednesday, thursday, friday, saturday, sunday';

const HHMM_RE = /^([01]\d|2[0-3]):([0-5]\d)$/;
/** Rough shape of a zone name; keeps offset strings ("+05:30") and junk away from Intl. */
const ZONE_NAME_RE = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;
const MAX_ZONE_NAME_LENGTH = 64;

/** Offset source; `null` stands for UTC (fast path, no Intl). */
type ZoneRef = IANAZone | null;

/**
 * Zone-name cache: input name → zone (`null` = UTC) or `false` when unknown. Bounded, since names
 * come from API input. Names are canonicalised (`europe/PRAGUE` → `Europe/Prague`,
 * `Etc/UTC` → `UTC`) before reaching luxon's own unbounded per-name zone cache and our memo.
 */
const zoneCache = new Map<string, ZoneRef | false>();
const MAX_ZONE_CACHE = 2048;

/** The zone for a tz name, or `undefined` when it is not a known IANA zone. */
function lookupZone(name: string): ZoneRef | undefined {
  let z = zoneCache.get(name);
  if (z === undefined) {
    z = false;
    if (name.length <= MAX_ZONE_NAME_LENGTH && ZONE_NAME_RE.test(name) && IANAZone.isValidZone(name)) {
      const canonical = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
      z = canonical === 'UTC' ? null : IANAZone.create(canonical);
    }
    if (zoneCache.size < MAX_ZONE_CACHE) zoneCache.set(name, z);
  }
  return z === false ? undefined : z;
}

interface CompiledWindow {
  /** Bit n set = JS weekday n (0 = Sunday) allowed. Never 0. */
  dayMask: number;
  /** Minutes after local midnight; ignored when `wholeDay`. */
  start: number;
  end: number;
  wholeDay: boolean;
  zone: ZoneRef;
}

type CompileResult = { ok: true; window: CompiledWindow } | { ok: false; field: string; message: string };

function parseHHMM(v: string): number | null {
  const m = HHMM_RE.exec(v);
  return m === null ? null : Number(m[1]) * 60 + Number(m[2]);
}

function compile(w: DeliveryWindow): CompileResult {
  if (typeof w !== 'object' || w === null || Array.isArray(w)) {
    return { ok: false, field: 'delivery_time', message: 'delivery_time must be an object' };
  }

  let dayMask = ALL_DAYS_MASK;
  if (w.days !== undefined) {
    const days: unknown = w.days;
    if (!Array.isArray(days)) {
      return { ok: false, field: 'delivery_time.days', message: `days must be an array of day names (${DAY_NAMES_TEXT})` };
    }
    if (days.length === 0) {
      return { ok: false, field: 'delivery_time.days', message: 'days must list at least one day (omit it for every day)' };
    }
    dayMask = 0;
    for (let i = 0; i < days.length; i++) {
      const name: unknown = days[i];
      const idx = typeof name === 'string' ? DAY_INDEX.get(name) : undefined;
      if (idx === undefined) {
        return { ok: false, field: `delivery_time.days[${i}]`, message: `day must be one of ${DAY_NAMES_TEXT} (lower case)` };
      }
      dayMask |= 1 << idx;
    }
  }

  let start: number | null = null;
  let end: number | null = null;
  if (w.start !== undefined) {
    start = typeof w.start === 'string' ? parseHHMM(w.start) : null;
    if (start === null) {
      return { ok: false, field: 'delivery_time.start', message: 'start must be HH:MM between 00:00 and 23:59' };
    }
  }
  if (w.end !== undefined) {
    end = typeof w.end === 'string' ? parseHHMM(w.end) : null;
    if (end === null) {
      return { ok: false, field: 'delivery_time.end', message: 'end must be HH:MM between 00:00 and 23:59' };
    }
  }
  if (start !== null && end === null) {
    return { ok: false, field: 'delivery_time.end', message: 'end is required when start is given' };
  }
  if (end !== null && start === null) {
    return { ok: false, field: 'delivery_time.start', message: 'start is required when end is given' };
  }

  let zone: ZoneRef = null;
  if (w.tz !== undefined) {
    const z = typeof w.tz === 'string' ? lookupZone(w.tz) : undefined;
    if (z === undefined) {
      return { ok: false, field: 'delivery_time.tz', message: 'tz must be an IANA time zone name such as Europe/Prague or UTC' };
    }
    zone = z;
  }

  const wholeDay = start === null || end === null || start === end;
  return { ok: true, window: { dayMask, start: start ?? 0, end: end ?? 0, wholeDay, zone } };
}

/** Validate a `delivery_time` object; the failure names the offending field. */
export function validateDeliveryWindow(w: DeliveryWindow): WindowCheck {
  const r = compile(w);
  return r.ok ? { ok: true } : { ok: false, field: r.field, message: r.message };
}

function compileOrThrow(w: DeliveryWindow): CompiledWindow {
  const r = compile(w);
  if (!r.ok) throw new RangeError(`invalid delivery window: ${r.field}: ${r.message}`);
  return r.window;
}

// ---------------------------------------------------------------------------------------------
// delivery window: time arithmetic
// ---------------------------------------------------------------------------------------------
// "Wall" values are local date-times encoded as if they were UTC epoch ms; a "day number" is
// floor(wall / DAY), i.e. days since 1970-01-01 on the local calendar.

function offsetMs(zone: ZoneRef, ts: number): number {
  return zone === null ? 0 : Math.round(zone.offset(ts) * MINUTE);
}

function weekdayOfDayNumber(dayNumber: number): number {
  // 1970-01-01 was a Thursday (4).
  return (((dayNumber + 4) % 7) + 7) % 7;
}

/**
 * The instant for a local wall time, with the module's DST rule: a wall time inside a gap maps to
 * the first instant after the gap; one inside a fold maps to its first (earlier) occurrence.
 * Monotone: a later wall time never maps to an earlier instant.
 */
function wallToInstant(zone: ZoneRef, wall: number): number {
  if (zone === null) return wall;
  // Window boundaries repeat across messages (same zone, same days, same HH:MM), so memoise.
  // Pure function of (zone, wall) given the runtime's tz data; bounded by clearing when full.
  const key = `${zone.name}|${wall}`;
  const hit = instantMemo.get(key);
  if (hit !== undefined) return hit;
  const instant = computeWallToInstant(zone, wall);
  if (instantMemo.size >= MAX_INSTANT_MEMO) instantMemo.clear();
  instantMemo.set(key, instant);
  return instant;
}

const instantMemo = new Map<string, number>();
const MAX_INSTANT_MEMO = 10_000;

function computeWallToInstant(zone: IANAZone, wall: number): number {
  // Offsets in force a day either side bracket any transition affecting this wall time.
  const before = offsetMs(zone, wall - DAY);
  const after = offsetMs(zone, wall + DAY);
  const larger = Math.max(before, after);
  const smaller = Math.min(before, after);
  // Larger offset → earlier instant, so this order prefers the first occurrence in a fold.
  const early = wall - larger;
  if (offsetMs(zone, early) === larger) return early;
  const late = wall - smaller;
  if (late !== early && offsetMs(zone, late) === smaller) return late;
  // Neither candidate exists: a gap (offset increased from `before` to `after`). The transition
  // instant T satisfies wall - after < T <= wall - before; it is the first instant whose offset
  // is no longer `before`, and its local time is the first existing wall time after the gap.
  if (after > before) {
    let lo = wall - after; // offset here is still `before`
    let hi = wall - before; // offset here is already past the transition
    if (offsetMs(zone, lo) === before && offsetMs(zone, hi) !== before) {
      while (hi - lo > 1) {
        const mid = lo + Math.floor((hi - lo) / 2);
        if (offsetMs(zone, mid) === before) lo = mid;
        else hi = mid;
      }
      return hi;
    }
  }
  // Irregular data (several transitions within two days): fall back to the earlier offset.
  return wall - before;
}

/** [open, close) instants of the window belonging to local day `dayNumber` (never empty). */
function windowInterval(c: CompiledWindow, dayNumber: number): [number, number] {
  const base = dayNumber * DAY;
  let open: number;
  let close: number;
  let nominal: number;
  if (c.wholeDay) {
    open = wallToInstant(c.zone, base);
    close = wallToInstant(c.zone, base + DAY);
    nominal = DAY;
  } else if (c.start < c.end) {
    open = wallToInstant(c.zone, base + c.start * MINUTE);
    close = wallToInstant(c.zone, base + c.end * MINUTE);
    nominal = (c.end - c.start) * MINUTE;
  } else {
    // Wraps past midnight: belongs to the day it starts on, ends on the next local day.
    open = wallToInstant(c.zone, base + c.start * MINUTE);
    close = wallToInstant(c.zone, base + DAY + c.end * MINUTE);
    nominal = DAY - (c.start - c.end) * MINUTE;
  }
  // A DST gap swallowed the whole window: keep it open for its nominal length after the gap.
  if (close <= open) close = open + nominal;
  return [open, close];
}

/** Earliest instant >= t inside the window. Always returns within 11 candidate days. */
function nextSendMs(c: CompiledWindow, t: number): number {
  const localDay = Math.floor((t + offsetMs(c.zone, t)) / DAY);
  // Windows are ordered by their open instant (wallToInstant is monotone), so the first allowed
  // day whose window closes after t gives the answer: t itself if already open, else its opening.
  // Starting two days back covers wrapped windows and folds around midnight; eight days ahead
  // always contains every weekday at least once with a window that closes after t.
  for (let d = localDay - 2; d <= localDay + 8; d++) {
    if ((c.dayMask & (1 << weekdayOfDayNumber(d))) === 0) continue;
    const [open, close] = windowInterval(c, d);
    if (close > t) return Math.max(open, t);
  }
  // Unreachable for a compiled window (dayMask is never 0 and windows are never empty).
  throw new Error('nextSendInstant: no window found within 8 days');
}

function instantOf(at: Date, fn: string): number {
  const t = at instanceof Date ? at.getTime() : Number.NaN;
  if (Number.isNaN(t)) throw new RangeError(`${fn}: at is an invalid Date`);
  return t;
}

/** True when `at` falls inside the window. Window must be valid. */
export function isInsideWindow(w: DeliveryWindow, at: Date): boolean {
  const t = instantOf(at, 'isInsideWindow');
  return nextSendMs(compileOrThrow(w), t) === t;
}

/** The earliest instant >= at when sending is allowed: `at` itself when inside, else the next window start. Window must be valid. */
export function nextSendInstant(w: DeliveryWindow, at: Date): Date {
  const t = instantOf(at, 'nextSendInstant');
  return new Date(nextSendMs(compileOrThrow(w), t));
}
