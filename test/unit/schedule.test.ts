import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DateTime } from 'luxon';
import {
  isInsideWindow,
  nextSendInstant,
  resolveSendAt,
  validateDeliveryWindow,
  type DeliveryWindow,
} from '../../shared/schedule/window.js';

const D = (iso: string): Date => {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw new Error(`bad test date ${iso}`);
  return d;
};
const iso = (d: Date): string => d.toISOString();
const SEC = 1000;
const DAY = 86_400_000;

// 2026-03-02 is a Monday. 2026-03-29 and 2026-10-25 are the EU DST Sundays.
const NOW = D('2026-03-02T12:00:00.000Z');

describe('resolveSendAt', () => {
  type Case = [name: string, input: string, expected: 'now' | 'invalid' | string];
  const plus = (ms: number) => new Date(NOW.getTime() + ms).toISOString();
  const cases: Case[] = [
    // forms
    ['zone-less is UTC', '2026-03-02T12:05:00', '2026-03-02T12:05:00.000Z'],
    ['zone-less without seconds', '2026-03-02T12:05', '2026-03-02T12:05:00.000Z'],
    ['Z', '2026-03-02T12:05:00Z', '2026-03-02T12:05:00.000Z'],
    ['lower-case z and t', '2026-03-02t12:05:00z', '2026-03-02T12:05:00.000Z'],
    ['space separator (RFC 3339)', '2026-03-02 12:05:00Z', '2026-03-02T12:05:00.000Z'],
    ['milliseconds', '2026-03-02T12:05:00.123Z', '2026-03-02T12:05:00.123Z'],
    ['comma fraction', '2026-03-02T12:05:00,5Z', '2026-03-02T12:05:00.500Z'],
    ['nanoseconds truncated', '2026-03-02T12:05:00.123999999Z', '2026-03-02T12:05:00.123Z'],
    ['offset +02:00', '2026-03-02T14:05:00+02:00', '2026-03-02T12:05:00.000Z'],
    ['offset -0500', '2026-03-02T07:05:00-0500', '2026-03-02T12:05:00.000Z'],
    ['offset +05 (hours only)', '2026-03-02T17:05:00+05', '2026-03-02T12:05:00.000Z'],
    ['offset +05:30', '2026-03-02T17:35:00+05:30', '2026-03-02T12:05:00.000Z'],
    ['offset -00:00', '2026-03-02T12:05:00-00:00', '2026-03-02T12:05:00.000Z'],
    ['offset crossing the date line', '2026-03-03T01:05:00+13:00', '2026-03-02T12:05:00.000Z'],
    // relative to now
    ['far past', '2020-01-01T00:00:00Z', 'now'],
    ['year 0050 (not 1950 via Date.UTC) is past', '0050-06-01T00:00:00Z', 'now'],
    ['leap day in the past', '2024-02-29T00:00:00Z', 'now'],
    ['1 s ago', plus(-1 * SEC), 'now'],
    ['exactly now', plus(0), 'now'],
    ['+30 s', plus(30 * SEC), 'now'],
    ['+60 s (boundary, inclusive)', plus(60 * SEC), 'now'],
    ['+60.001 s', plus(60 * SEC + 1), plus(60 * SEC + 1)],
    ['+61 s', plus(61 * SEC), plus(61 * SEC)],
    ['+365 d exactly', plus(365 * DAY), plus(365 * DAY)],
    ['+365 d +1 ms', plus(365 * DAY + 1), 'invalid'],
    ['+366 d', plus(366 * DAY), 'invalid'],
    ['offset makes it +30 s', '2026-03-02T14:00:30+02:00', 'now'],
    ['offset makes it +61 s', '2026-03-02T14:01:01+02:00', '2026-03-02T12:01:01.000Z'],
    // malformed
    ['date-only is rejected (documented)', '2026-03-05', 'invalid'],
    ['empty', '', 'invalid'],
    ['garbage', 'tomorrow at noon', 'invalid'],
    ['Feb 30', '2026-02-30T10:00:00Z', 'invalid'],
    ['Feb 29 in a non-leap year', '2027-02-29T10:00:00Z', 'invalid'],
    ['month 13', '2026-13-01T10:00:00Z', 'invalid'],
    ['day 00', '2026-03-00T10:00:00Z', 'invalid'],
    ['hour 24', '2026-03-02T24:00:00Z', 'invalid'],
    ['minute 60', '2026-03-02T12:60:00Z', 'invalid'],
    ['leap second', '2026-03-02T12:05:60Z', 'invalid'],
    ['single-digit hour', '2026-03-02T9:05:00Z', 'invalid'],
    ['offset +24:00', '2026-03-02T12:05:00+24:00', 'invalid'],
    ['offset minutes 60', '2026-03-02T12:05:00+01:60', 'invalid'],
    ['double zone', '2026-03-02T12:05:00Z+01:00', 'invalid'],
    ['basic format', '20260302T120500Z', 'invalid'],
    ['week date', '2026-W10-1T12:05:00Z', 'invalid'],
    ['ordinal date', '2026-061T12:05:00Z', 'invalid'],
    ['surrounding whitespace', ' 2026-03-02T12:05:00Z ', 'invalid'],
    ['named zone suffix', '2026-03-02T12:05:00 Europe/Prague', 'invalid'],
    ['epoch number as string', '1772452800000', 'invalid'],
  ];
  for (const [name, input, expected] of cases) {
    it(`${name}: ${JSON.stringify(input)}`, () => {
      const r = resolveSendAt(input, NOW);
      if (expected === 'invalid') {
        assert.equal(r.ok, false);
        if (!r.ok) assert.match(r.message, /datetime/);
      } else if (expected === 'now') {
        assert.deepEqual(r, { ok: true, sendAt: null });
      } else {
        assert.equal(r.ok, true);
        if (r.ok) {
          assert.ok(r.sendAt instanceof Date);
          assert.equal(r.sendAt.toISOString(), expected);
        }
      }
    });
  }

  it('date-only message asks for a time', () => {
    const r = resolveSendAt('2026-03-05', NOW);
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.message, /time of day/);
  });

  it('too far ahead says so', () => {
    const r = resolveSendAt('2027-06-01T00:00:00Z', NOW);
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.message, /365 days/);
  });

  it('non-string input (untyped caller) is rejected, not thrown', () => {
    const r = resolveSendAt(12345 as unknown as string, NOW);
    assert.equal(r.ok, false);
  });

  it('invalid now throws (caller bug)', () => {
    assert.throws(() => resolveSendAt('2026-03-02T12:05:00Z', new Date(Number.NaN)), RangeError);
  });
});

describe('validateDeliveryWindow', () => {
  const valid: [string, unknown][] = [
    ['empty object (every day, whole day)', {}],
    ['full', { days: ['monday', 'friday'], start: '09:00', end: '17:30', tz: 'Europe/Prague' }],
    ['days only', { days: ['saturday', 'sunday'] }],
    ['all seven days', { days: ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] }],
    ['duplicate days are harmless', { days: ['monday', 'monday'] }],
    ['times only', { start: '00:00', end: '23:59' }],
    ['wrapping', { start: '22:00', end: '06:00' }],
    ['start == end', { start: '09:00', end: '09:00' }],
    ['tz UTC', { tz: 'UTC' }],
    ['tz lower-case utc', { tz: 'utc' }],
    ['tz Asia/Kolkata', { tz: 'Asia/Kolkata' }],
    ['tz America/New_York', { tz: 'America/New_York' }],
    ['tz Etc/GMT+3', { tz: 'Etc/GMT+3' }],
    ['tz alias Asia/Calcutta', { tz: 'Asia/Calcutta' }],
    ['explicit undefined fields', { days: undefined, start: undefined, end: undefined, tz: undefined }],
  ];
  for (const [name, w] of valid) {
    it(`valid: ${name}`, () => {
      assert.deepEqual(validateDeliveryWindow(w as DeliveryWindow), { ok: true });
    });
  }

  const invalid: [string, unknown, string][] = [
    ['null', null, 'delivery_time'],
    ['array', [], 'delivery_time'],
    ['string', 'monday', 'delivery_time'],
    ['days not an array', { days: 'monday' }, 'delivery_time.days'],
    ['days empty', { days: [] }, 'delivery_time.days'],
    ['capitalised day', { days: ['Monday'] }, 'delivery_time.days[0]'],
    ['unknown day at index 2', { days: ['monday', 'tuesday', 'funday'] }, 'delivery_time.days[2]'],
    ['abbreviated day', { days: ['mon'] }, 'delivery_time.days[0]'],
    ['non-string day', { days: ['monday', 1] }, 'delivery_time.days[1]'],
    ['prototype key as day', { days: ['constructor'] }, 'delivery_time.days[0]'],
    ['start hour 24', { start: '24:00', end: '06:00' }, 'delivery_time.start'],
    ['start minute 60', { start: '12:60', end: '13:00' }, 'delivery_time.start'],
    ['start one-digit hour', { start: '9:00', end: '17:00' }, 'delivery_time.start'],
    ['start one-digit minute', { start: '09:0', end: '17:00' }, 'delivery_time.start'],
    ['start three-digit hour', { start: '009:00', end: '17:00' }, 'delivery_time.start'],
    ['start with seconds', { start: '09:00:00', end: '17:00' }, 'delivery_time.start'],
    ['start padded', { start: ' 09:00', end: '17:00' }, 'delivery_time.start'],
    ['start not a string', { start: 900, end: '17:00' }, 'delivery_time.start'],
    ['end 24:00', { start: '09:00', end: '24:00' }, 'delivery_time.end'],
    ['end 12:5x', { start: '09:00', end: '12:5x' }, 'delivery_time.end'],
    ['start without end', { start: '09:00' }, 'delivery_time.end'],
    ['end without start', { end: '17:00' }, 'delivery_time.start'],
    ['unknown tz', { tz: 'Mars/Olympus_Mons' }, 'delivery_time.tz'],
    ['offset string as tz', { tz: '+05:30' }, 'delivery_time.tz'],
    ['UTC+5 as tz', { tz: 'UTC+5' }, 'delivery_time.tz'],
    ['empty tz', { tz: '' }, 'delivery_time.tz'],
    ['null tz', { tz: null }, 'delivery_time.tz'],
    ['numeric tz', { tz: 1 }, 'delivery_time.tz'],
    ['very long tz', { tz: `Europe/${'x'.repeat(200)}` }, 'delivery_time.tz'],
  ];
  for (const [name, w, field] of invalid) {
    it(`invalid: ${name} → ${field}`, () => {
      const r = validateDeliveryWindow(w as DeliveryWindow);
      assert.equal(r.ok, false);
      if (!r.ok) {
        assert.equal(r.field, field);
        assert.ok(r.message.length > 0);
      }
    });
  }

  it('invalid tz is rejected again from the cache', () => {
    for (let i = 0; i < 3; i++) {
      const r = validateDeliveryWindow({ tz: 'Mars/Olympus_Mons' });
      assert.equal(r.ok, false);
    }
  });

  it('isInsideWindow / nextSendInstant throw on an invalid window', () => {
    assert.throws(() => isInsideWindow({ tz: 'Nowhere/Land' }, NOW), RangeError);
    assert.throws(() => nextSendInstant({ days: [] }, NOW), RangeError);
    assert.throws(() => nextSendInstant({ start: '09:00' }, NOW), RangeError);
  });

  it('invalid `at` throws', () => {
    assert.throws(() => nextSendInstant({}, new Date(Number.NaN)), RangeError);
  });
});

/** [at, expected inside?, expected nextSendInstant] */
type Probe = [at: string, inside: boolean, next: string];

function probeWindow(title: string, w: DeliveryWindow, probes: Probe[]): void {
  describe(title, () => {
    for (const [at, inside, next] of probes) {
      it(`${at} → ${inside ? 'inside' : `outside, next ${next}`}`, () => {
        assert.equal(isInsideWindow(w, D(at)), inside, 'isInsideWindow');
        const n = nextSendInstant(w, D(at));
        assert.equal(iso(n), iso(D(next)), 'nextSendInstant');
        if (inside) assert.equal(iso(n), iso(D(at)));
        // The answer is itself inside, and the window is open from there.
        assert.equal(isInsideWindow(w, n), true, 'result is inside');
        assert.equal(iso(nextSendInstant(w, n)), iso(n), 'idempotent');
      });
    }
  });
}

describe('delivery windows', () => {
  probeWindow(
    'edges: weekdays 09:00–17:00 UTC (start inclusive, end exclusive)',
    { days: ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'], start: '09:00', end: '17:00' },
    [
      ['2026-03-02T08:59:59.999Z', false, '2026-03-02T09:00:00Z'],
      ['2026-03-02T09:00:00.000Z', true, '2026-03-02T09:00:00Z'],
      ['2026-03-02T12:34:56.789Z', true, '2026-03-02T12:34:56.789Z'],
      ['2026-03-02T16:59:59.999Z', true, '2026-03-02T16:59:59.999Z'],
      ['2026-03-02T17:00:00.000Z', false, '2026-03-03T09:00:00Z'],
      ['2026-03-06T17:00:00.000Z', false, '2026-03-09T09:00:00Z'], // Friday evening → Monday
      ['2026-03-07T12:00:00.000Z', false, '2026-03-09T09:00:00Z'], // Saturday
      ['2026-03-08T23:59:59.999Z', false, '2026-03-09T09:00:00Z'], // Sunday night
    ],
  );

  probeWindow('tz defaults to UTC', { start: '09:00', end: '10:00' }, [
    ['2026-03-02T09:30:00Z', true, '2026-03-02T09:30:00Z'],
    ['2026-03-02T10:00:00Z', false, '2026-03-03T09:00:00Z'],
  ]);

  probeWindow('no days, no times: always open', {}, [
    ['2026-03-02T00:00:00Z', true, '2026-03-02T00:00:00Z'],
    ['2026-03-07T23:59:59.999Z', true, '2026-03-07T23:59:59.999Z'],
  ]);

  probeWindow(
    'wrap past midnight: 22:00–06:00, Monday only (belongs to the day it starts)',
    { days: ['monday'], start: '22:00', end: '06:00' },
    [
      ['2026-03-02T23:00:00Z', true, '2026-03-02T23:00:00Z'], // Mon 23:00
      ['2026-03-03T02:00:00Z', true, '2026-03-03T02:00:00Z'], // Tue 02:00: Monday's window
      ['2026-03-03T05:59:59.999Z', true, '2026-03-03T05:59:59.999Z'],
      ['2026-03-03T06:00:00Z', false, '2026-03-09T22:00:00Z'], // end exclusive
      ['2026-03-03T07:00:00Z', false, '2026-03-09T22:00:00Z'], // Tue 07:00 → next Monday 22:00
      ['2026-03-02T02:00:00Z', false, '2026-03-02T22:00:00Z'], // Mon 02:00 is Sunday's window
      ['2026-03-02T21:59:59.999Z', false, '2026-03-02T22:00:00Z'],
      ['2026-03-02T22:00:00Z', true, '2026-03-02T22:00:00Z'],
      ['2026-03-01T23:00:00Z', false, '2026-03-02T22:00:00Z'], // Sun 23:00
    ],
  );

  probeWindow(
    'wrap past midnight, every day: 22:00–06:00',
    { start: '22:00', end: '06:00' },
    [
      ['2026-03-02T02:00:00Z', true, '2026-03-02T02:00:00Z'],
      ['2026-03-02T12:00:00Z', false, '2026-03-02T22:00:00Z'],
      ['2026-03-02T00:00:00Z', true, '2026-03-02T00:00:00Z'],
    ],
  );

  probeWindow('days only: weekend, UTC', { days: ['saturday', 'sunday'] }, [
    ['2026-03-06T23:59:59.999Z', false, '2026-03-07T00:00:00Z'],
    ['2026-03-07T00:00:00Z', true, '2026-03-07T00:00:00Z'],
    ['2026-03-08T23:59:59.999Z', true, '2026-03-08T23:59:59.999Z'],
    ['2026-03-09T00:00:00Z', false, '2026-03-14T00:00:00Z'],
  ]);

  probeWindow(
    'start == end means the whole day (documented): Monday 09:00–09:00',
    { days: ['monday'], start: '09:00', end: '09:00' },
    [
      ['2026-03-02T00:00:00Z', true, '2026-03-02T00:00:00Z'],
      ['2026-03-02T08:00:00Z', true, '2026-03-02T08:00:00Z'],
      ['2026-03-02T23:59:59.999Z', true, '2026-03-02T23:59:59.999Z'],
      ['2026-03-03T00:00:00Z', false, '2026-03-09T00:00:00Z'],
      ['2026-03-03T09:30:00Z', false, '2026-03-09T00:00:00Z'],
      ['2026-03-01T23:00:00Z', false, '2026-03-02T00:00:00Z'],
    ],
  );

  it('start == end 00:00 behaves like days only', () => {
    const a: DeliveryWindow = { days: ['friday'], start: '00:00', end: '00:00', tz: 'Asia/Kolkata' };
    const b: DeliveryWindow = { days: ['friday'], tz: 'Asia/Kolkata' };
    for (let t = D('2026-03-01T00:00:00Z').getTime(); t < D('2026-03-15T00:00:00Z').getTime(); t += 17 * 60_000) {
      assert.equal(isInsideWindow(a, new Date(t)), isInsideWindow(b, new Date(t)));
      assert.equal(iso(nextSendInstant(a, new Date(t))), iso(nextSendInstant(b, new Date(t))));
    }
  });
});

describe('time zones', () => {
  probeWindow(
    'America/New_York weekdays 09:00–17:00 (EST -05:00, then EDT -04:00 from 2026-03-08)',
    { days: ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'], start: '09:00', end: '17:00', tz: 'America/New_York' },
    [
      ['2026-03-02T13:59:59.999Z', false, '2026-03-02T14:00:00Z'],
      ['2026-03-02T14:00:00Z', true, '2026-03-02T14:00:00Z'],
      ['2026-03-02T21:59:59.999Z', true, '2026-03-02T21:59:59.999Z'],
      ['2026-03-02T22:00:00Z', false, '2026-03-03T14:00:00Z'],
      // Friday evening → Monday across the US spring-forward: 09:00 EDT = 13:00Z
      ['2026-03-06T22:00:00Z', false, '2026-03-09T13:00:00Z'],
      // Saturday 2026-03-07 03:00Z is still Friday 22:00 in New York: outside (after 17:00)
      ['2026-03-07T03:00:00Z', false, '2026-03-09T13:00:00Z'],
    ],
  );

  probeWindow('America/New_York days only: Monday', { days: ['monday'], tz: 'America/New_York' }, [
    ['2026-03-02T04:59:59.999Z', false, '2026-03-02T05:00:00Z'], // Sun 23:59 EST
    ['2026-03-02T05:00:00Z', true, '2026-03-02T05:00:00Z'],
    ['2026-03-03T04:59:59.999Z', true, '2026-03-03T04:59:59.999Z'],
    ['2026-03-03T05:00:00Z', false, '2026-03-09T04:00:00Z'], // next Monday is EDT
  ]);

  probeWindow(
    'Asia/Kolkata (+05:30) 09:00–17:00 every day',
    { start: '09:00', end: '17:00', tz: 'Asia/Kolkata' },
    [
      ['2026-03-02T03:29:59.999Z', false, '2026-03-02T03:30:00Z'],
      ['2026-03-02T03:30:00Z', true, '2026-03-02T03:30:00Z'],
      ['2026-03-02T11:29:59.999Z', true, '2026-03-02T11:29:59.999Z'],
      ['2026-03-02T11:30:00Z', false, '2026-03-03T03:30:00Z'],
    ],
  );

  probeWindow('Asia/Kolkata days only: Monday', { days: ['monday'], tz: 'Asia/Kolkata' }, [
    ['2026-03-01T18:29:59.999Z', false, '2026-03-01T18:30:00Z'], // Sun 23:59:59 IST
    ['2026-03-01T19:00:00Z', true, '2026-03-01T19:00:00Z'], // Mon 00:30 IST (Sunday in UTC)
    ['2026-03-02T18:30:00Z', false, '2026-03-08T18:30:00Z'], // Tue 00:00 IST
  ]);

  probeWindow(
    'Asia/Kolkata wrap 22:00–06:00 Monday only',
    { days: ['monday'], start: '22:00', end: '06:00', tz: 'Asia/Kolkata' },
    [
      ['2026-03-02T16:29:59.999Z', false, '2026-03-02T16:30:00Z'],
      ['2026-03-02T16:30:00Z', true, '2026-03-02T16:30:00Z'], // Mon 22:00 IST
      ['2026-03-02T20:30:00Z', true, '2026-03-02T20:30:00Z'], // Tue 02:00 IST
      ['2026-03-03T00:30:00Z', false, '2026-03-09T16:30:00Z'], // Tue 06:00 IST
    ],
  );

  it('zone names are case-insensitive and aliases work (canonicalised)', () => {
    const at = D('2026-03-29T00:30:00Z');
    const want = iso(nextSendInstant({ days: ['sunday'], start: '02:30', end: '05:00', tz: 'Europe/Prague' }, at));
    assert.equal(want, '2026-03-29T01:00:00.000Z');
    for (const tz of ['europe/prague', 'EUROPE/PRAGUE']) {
      assert.equal(iso(nextSendInstant({ days: ['sunday'], start: '02:30', end: '05:00', tz }, at)), want);
    }
    for (const tz of ['Etc/UTC', 'GMT', 'utc']) {
      assert.equal(iso(nextSendInstant({ start: '09:00', end: '10:00', tz }, NOW)), '2026-03-03T09:00:00.000Z');
    }
    assert.equal(iso(nextSendInstant({ start: '09:00', end: '10:00', tz: 'US/Eastern' }, NOW)), '2026-03-02T14:00:00.000Z');
  });

  it('America/New_York fold (2026-11-01 01:30 happens twice): first occurrence (EDT)', () => {
    const w: DeliveryWindow = { days: ['sunday'], start: '01:30', end: '04:00', tz: 'America/New_York' };
    assert.equal(iso(nextSendInstant(w, D('2026-11-01T04:00:00Z'))), '2026-11-01T05:30:00.000Z');
  });
});

describe('DST in Europe/Prague', () => {
  it('luxon alone: gap shifts by the gap length, fold takes the later offset (why we handle both)', () => {
    const gap = DateTime.fromObject({ year: 2026, month: 3, day: 29, hour: 2, minute: 30 }, { zone: 'Europe/Prague' });
    assert.equal(gap.isValid, true);
    assert.equal(gap.toUTC().toISO(), '2026-03-29T01:30:00.000Z'); // 03:30 CEST, not 03:00
    const fold = DateTime.fromObject({ year: 2026, month: 10, day: 25, hour: 2, minute: 30 }, { zone: 'Europe/Prague' });
    assert.equal(fold.toUTC().toISO(), '2026-10-25T01:30:00.000Z'); // second occurrence (CET)
  });

  // Spring forward: 2026-03-29 02:00 CET → 03:00 CEST at 01:00Z; 02:00–02:59 does not exist.
  probeWindow(
    'gap: Sunday 02:30–05:00 opens at the first instant after the gap (03:00 CEST = 01:00Z)',
    { days: ['sunday'], start: '02:30', end: '05:00', tz: 'Europe/Prague' },
    [
      ['2026-03-28T23:00:00Z', false, '2026-03-29T01:00:00Z'], // Sun 00:00 CET
      ['2026-03-29T00:59:59.999Z', false, '2026-03-29T01:00:00Z'], // 01:59:59.999 CET
      ['2026-03-29T01:00:00Z', true, '2026-03-29T01:00:00Z'], // 03:00 CEST
      ['2026-03-29T02:59:59.999Z', true, '2026-03-29T02:59:59.999Z'], // 04:59 CEST
      ['2026-03-29T03:00:00Z', false, '2026-04-05T00:30:00Z'], // 05:00 CEST → next Sunday 02:30 CEST
      ['2026-03-22T01:30:00Z', true, '2026-03-22T01:30:00Z'], // previous Sunday 02:30 CET
    ],
  );

  probeWindow(
    'gap: end 02:30 closes at 03:00 CEST (Sunday 01:00–02:30)',
    { days: ['sunday'], start: '01:00', end: '02:30', tz: 'Europe/Prague' },
    [
      ['2026-03-29T00:00:00Z', true, '2026-03-29T00:00:00Z'], // 01:00 CET
      ['2026-03-29T00:59:59.999Z', true, '2026-03-29T00:59:59.999Z'],
      ['2026-03-29T01:00:00Z', false, '2026-04-04T23:00:00Z'], // next Sunday 01:00 CEST
    ],
  );

  probeWindow(
    'gap swallows the whole window (02:00–03:00): open 03:00–04:00 CEST for its nominal hour',
    { days: ['sunday'], start: '02:00', end: '03:00', tz: 'Europe/Prague' },
    [
      ['2026-03-28T23:00:00Z', false, '2026-03-29T01:00:00Z'],
      ['2026-03-29T01:00:00Z', true, '2026-03-29T01:00:00Z'],
      ['2026-03-29T01:59:59.999Z', true, '2026-03-29T01:59:59.999Z'],
      ['2026-03-29T02:00:00Z', false, '2026-04-05T00:00:00Z'],
    ],
  );

  probeWindow(
    'gap: wrapped Saturday 22:00–02:30 ends at 03:00 CEST',
    { days: ['saturday'], start: '22:00', end: '02:30', tz: 'Europe/Prague' },
    [
      ['2026-03-28T21:00:00Z', true, '2026-03-28T21:00:00Z'], // Sat 22:00 CET
      ['2026-03-29T00:59:59.999Z', true, '2026-03-29T00:59:59.999Z'],
      ['2026-03-29T01:00:00Z', false, '2026-04-04T20:00:00Z'], // next Sat 22:00 CEST
    ],
  );

  probeWindow('gap: whole-day Sunday is 23 hours long', { days: ['sunday'], tz: 'Europe/Prague' }, [
    ['2026-03-28T22:59:59.999Z', false, '2026-03-28T23:00:00Z'],
    ['2026-03-28T23:00:00Z', true, '2026-03-28T23:00:00Z'],
    ['2026-03-29T21:59:59.999Z', true, '2026-03-29T21:59:59.999Z'], // 23:59:59 CEST
    ['2026-03-29T22:00:00Z', false, '2026-04-04T22:00:00Z'],
  ]);

  // Fall back: 2026-10-25 03:00 CEST → 02:00 CET at 01:00Z; 02:00–02:59 happens twice.
  probeWindow(
    'fold: Sunday 02:30–05:00 opens at the FIRST 02:30 (CEST, 00:30Z)',
    { days: ['sunday'], start: '02:30', end: '05:00', tz: 'Europe/Prague' },
    [
      ['2026-10-24T22:00:00Z', false, '2026-10-25T00:30:00Z'], // Sun 00:00 CEST
      ['2026-10-25T00:29:59.999Z', false, '2026-10-25T00:30:00Z'],
      ['2026-10-25T00:30:00Z', true, '2026-10-25T00:30:00Z'], // first 02:30 (CEST)
      ['2026-10-25T01:00:00Z', true, '2026-10-25T01:00:00Z'], // second 02:00 (CET)
      ['2026-10-25T01:30:00Z', true, '2026-10-25T01:30:00Z'], // second 02:30 (CET)
      ['2026-10-25T03:59:59.999Z', true, '2026-10-25T03:59:59.999Z'], // 04:59 CET
      ['2026-10-25T04:00:00Z', false, '2026-11-01T01:30:00Z'], // 05:00 CET → next Sunday 02:30 CET
    ],
  );

  probeWindow(
    'fold: end 02:30 closes at the first 02:30 and does not re-open in the repeated hour',
    { days: ['sunday'], start: '01:00', end: '02:30', tz: 'Europe/Prague' },
    [
      ['2026-10-24T23:00:00Z', true, '2026-10-24T23:00:00Z'], // 01:00 CEST
      ['2026-10-25T00:29:59.999Z', true, '2026-10-25T00:29:59.999Z'],
      ['2026-10-25T00:30:00Z', false, '2026-11-01T00:00:00Z'], // first 02:30
      ['2026-10-25T01:15:00Z', false, '2026-11-01T00:00:00Z'], // second 02:15: still closed
    ],
  );

  probeWindow('fold: whole-day Sunday is 25 hours long', { days: ['sunday'], tz: 'Europe/Prague' }, [
    ['2026-10-24T21:59:59.999Z', false, '2026-10-24T22:00:00Z'],
    ['2026-10-24T22:00:00Z', true, '2026-10-24T22:00:00Z'],
    ['2026-10-25T22:59:59.999Z', true, '2026-10-25T22:59:59.999Z'],
    ['2026-10-25T23:00:00Z', false, '2026-10-31T23:00:00Z'],
  ]);
});

describe('search across a week', () => {
  probeWindow('Sunday-only 09:00–10:00 UTC', { days: ['sunday'], start: '09:00', end: '10:00' }, [
    ['2026-03-02T10:00:00Z', false, '2026-03-08T09:00:00Z'], // Monday → Sunday
    ['2026-03-08T10:00:00Z', false, '2026-03-15T09:00:00Z'], // just missed: a full week ahead
    ['2026-03-08T09:59:59.999Z', true, '2026-03-08T09:59:59.999Z'],
  ]);

  probeWindow(
    'Saturday-only wrap 23:59–00:00 in Pacific/Kiritimati (+14:00)',
    { days: ['saturday'], start: '23:59', end: '00:00', tz: 'Pacific/Kiritimati' },
    [
      ['2026-03-07T09:59:59Z', true, '2026-03-07T09:59:59Z'], // Sat 23:59:59 local
      ['2026-03-07T10:00:00Z', false, '2026-03-14T09:59:00Z'],
    ],
  );

  // Deterministic pseudo-random comparison with a naive wall-clock oracle (valid for zones and
  // dates without DST transitions in range).
  function lcg(seed: number): () => number {
    let s = seed >>> 0;
    return () => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s / 2 ** 32;
    };
  }
  const ALL = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'] as const;
  const OFFSETS: Record<string, number> = { UTC: 0, 'Asia/Kolkata': 330, 'Asia/Kathmandu': 345, 'Pacific/Honolulu': -600 };

  function naiveInside(w: DeliveryWindow, t: number): boolean {
    const off = OFFSETS[w.tz ?? 'UTC'];
    assert.ok(off !== undefined);
    const local = t + off * 60_000;
    const dayNo = Math.floor(local / DAY);
    const minute = Math.floor((local - dayNo * DAY) / 60_000);
    const allowed = (d: number) => {
      const name = ALL[(((d + 4) % 7) + 7) % 7];
      return w.days === undefined || (name !== undefined && w.days.includes(name));
    };
    const hm = (s: string) => Number(s.slice(0, 2)) * 60 + Number(s.slice(3, 5));
    if (w.start === undefined || w.end === undefined || w.start === w.end) return allowed(dayNo);
    const s = hm(w.start);
    const e = hm(w.end);
    if (s < e) return allowed(dayNo) && minute >= s && minute < e;
    return (allowed(dayNo) && minute >= s) || (allowed(dayNo - 1) && minute < e);
  }

  it('matches a brute-force oracle on 300 random windows', () => {
    const rnd = lcg(20260302);
    const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
    const zones = Object.keys(OFFSETS);
    for (let i = 0; i < 300; i++) {
      const days = ALL.filter(() => rnd() < 0.3);
      const w: DeliveryWindow = {};
      if (days.length > 0 && rnd() < 0.8) w.days = [...days];
      if (rnd() < 0.8) {
        w.start = hhmm(Math.floor(rnd() * 1440));
        w.end = rnd() < 0.05 ? w.start : hhmm(Math.floor(rnd() * 1440));
      }
      if (rnd() < 0.8) w.tz = zones[Math.floor(rnd() * zones.length)];
      assert.deepEqual(validateDeliveryWindow(w), { ok: true });
      const at = D('2026-06-01T00:00:00Z').getTime() + Math.floor(rnd() * 60 * DAY);
      const got = nextSendInstant(w, new Date(at)).getTime();
      assert.equal(isInsideWindow(w, new Date(at)), naiveInside(w, at), JSON.stringify({ w, at }));
      // Oracle: the first minute boundary from `at` on that is inside (or `at` itself).
      let want: number | null = naiveInside(w, at) ? at : null;
      for (let t = Math.ceil(at / 60_000) * 60_000; want === null && t <= at + 8 * DAY; t += 60_000) {
        if (naiveInside(w, t)) want = t;
      }
      assert.ok(want !== null, 'oracle found a window within 8 days');
      assert.equal(got, want, JSON.stringify({ w, at: new Date(at).toISOString() }));
    }
  });

  it('terminates within 8 days for every day set, around both Prague DST changes', () => {
    const times = ['00:00', '02:00', '02:30', '03:00', '23:59'];
    const ats = ['2026-03-28T00:00:00Z', '2026-03-29T01:00:00Z', '2026-10-24T23:00:00Z', '2026-10-25T01:30:00Z'];
    for (let mask = 1; mask < 128; mask++) {
      const days = ALL.filter((_, i) => (mask & (1 << i)) !== 0);
      for (const start of times) {
        for (const end of times) {
          const w: DeliveryWindow = { days: [...days], start, end, tz: 'Europe/Prague' };
          for (const a of ats) {
            const at = D(a);
            const n = nextSendInstant(w, at);
            assert.ok(n.getTime() >= at.getTime());
            assert.ok(n.getTime() - at.getTime() <= 8 * DAY, JSON.stringify({ w, a }));
            assert.equal(isInsideWindow(w, n), true, JSON.stringify({ w, a }));
          }
        }
      }
    }
  });

  it('is fast enough to run per message', () => {
    const w: DeliveryWindow = { days: ['saturday'], start: '22:00', end: '06:00', tz: 'Europe/Prague' };
    const start = performance.now();
    const base = D('2026-03-02T00:00:00Z').getTime();
    for (let i = 0; i < 10_000; i++) nextSendInstant(w, new Date(base + i * 3_600_000));
    const perCall = (performance.now() - start) / 10_000;
    assert.ok(perCall < 1, `nextSendInstant took ${perCall.toFixed(3)} ms per call`);
  });
});
