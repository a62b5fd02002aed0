/**
 * The recovery sweep's walks over attempts, as pure rules: what a page of attempts gives (timers to
 * set, SMS to fail, how far the walk got) for the waiting walk and for the walk after Redis lost
 * the timers; and the binary search for the first attempt of the last days.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstIdSince, planAttemptPage, type WalkedAttempt } from '../../workers/recovery.js';
import type { FlowStep } from '../../shared/channels/index.js';
import type { AttemptState } from '../../shared/carriers/types.js';

const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;
const MIN = 60_000;
const flow = [{ viber: { sender: 'Shop', ttl: 5 } }, { sms: {} }] as unknown as FlowStep[];

/** An attempt made `ageH` hours ago, handed `handedAgoH` hours ago (null: not recorded). */
function attempt(
  id: number, channel: string, state: AttemptState, ageH: number, handedAgoH: number | null = ageH, step = 0, partsOut = false,
): WalkedAttempt {
  const live = state === 'sending' || state === 'sent';
  return {
    id, channel, state, step, created_ms: NOW - ageH * HOUR, handed_ms: handedAgoH === null ? null : NOW - handedAgoH * HOUR,
    flow: live ? flow : null, parts_out: state === 'sending' ? partsOut : null,
  };
}

test('planAttemptPage: the waiting walk (a bound of 72 h) and the walk after Redis lost the timers (no bound)', () => {
  const page = [
    attempt(1, 'viber', 'sent', 80, 79), // old, waiting: its timer, due 5 min after its hand-over
    attempt(2, 'sms', 'sending', 80), // old SMS never answered: failed by the waiting walk only
    attempt(3, 'sms', 'sent', 75), // SMS sent without a receipt: nothing
    attempt(4, 'viber', 'delivered', 74), // settled: nothing
    attempt(5, 'viber', 'sending', 73, null), // no hand-over recorded: due 5 min after its creation (old), its job's (after a loss)
    attempt(6, 'legacy_fax', 'sent', 73), // a channel this version does not know: walked past
    attempt(7, 'sms', 'sending', 73, null, 0, true), // old long SMS whose hand-over stopped after part 1: failed after `sent`
    attempt(7.5, 'viber', 'sending', 73, 73, 0, true), // a ref registered before Viber took it: a step waiting at `delivered`, its timer
    attempt(8, 'viber', 'sent', 2, 2, 1), // young; step 1 is the flow's last: 1440 min
    attempt(9, 'sms', 'sending', 1, null, 0, true), // young SMS still sending: its answer may yet come
  ];
  type Case = [name: string, boundMs: number | null, expected: ReturnType<typeof planAttemptPage>];
  const cases: Case[] = [
    ['72 h bound: stops at the first young attempt', 72 * HOUR, {
      walked: 8, last: 7.5, failed: [2], partlySent: [7],
      timers: [[1, NOW - 79 * HOUR + 5 * MIN], [5, NOW - 73 * HOUR + 5 * MIN], [7.5, NOW - 73 * HOUR + 5 * MIN]],
    }],
    ['no bound: every attempt, timers only, of attempts handed over', null, {
      walked: 10, last: 9, failed: [], partlySent: [],
      timers: [[1, NOW - 79 * HOUR + 5 * MIN], [7.5, NOW - 73 * HOUR + 5 * MIN], [8, NOW - 2 * HOUR + 1440 * MIN]],
    }],
    ['a bound older than every attempt: nothing walked', 100 * HOUR, { walked: 0, last: null, failed: [], partlySent: [], timers: [] }],
  ];
  for (const [name, boundMs, expected] of cases) {
    assert.deepEqual(planAttemptPage(page, { now: NOW, boundMs }), expected, name);
  }
  assert.deepEqual(planAttemptPage([], { now: NOW, boundMs: null }), { walked: 0, last: null, failed: [], partlySent: [], timers: [] }, 'an empty page');
});

test('firstIdSince: a binary search over ids for the first attempt created since a moment', async () => {
  /** Attempts as [id, created ms]; ids with gaps (rolled-back inserts), one pair out of order. */
  const rows: Array<[number, number]> = [[1, 10], [2, 20], [5, 30], [6, 40], [9, 50], [10, 49], [20, 60], [21, 70]];
  const probe = (log: number[]) => async (atLeast: number) => {
    log.push(atLeast);
    const row = rows.find(([id]) => id >= atLeast);
    return row ? { id: row[0], createdMs: row[1] } : null;
  };
  type Case = [sinceMs: number, upTo: number, expected: number];
  const cases: Case[] = [
    [0, 21, 1], // all young: the walk starts at the first id
    [10, 21, 1],
    [11, 21, 2],
    [25, 21, 3], // ids 3 and 4 do not exist: the walk from 3 finds 5 first
    [45, 21, 7], // 9 is the first young one (10 is older, within the caller's margin)
    [55, 21, 11],
    [70, 21, 21],
    [71, 21, 22], // none young: upTo + 1, an empty walk
    [0, 0, 1], // no attempts at all
  ];
  for (const [sinceMs, upTo, expected] of cases) {
    const log: number[] = [];
    assert.equal(await firstIdSince(probe(log), upTo, sinceMs), expected, `since ${sinceMs}`);
    assert.ok(log.length <= Math.ceil(Math.log2(upTo + 1)) + 1, `since ${sinceMs}: ${log.length} probes`);
  }
});
