import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  copiesByRole,
  copiesOf,
  describeCopies,
  expandCopies,
  hasCopies,
  parseCopies,
  tpsOf,
  unknownRoles,
  withTps,
} from '../../scripts/bench/copies.js';
import { DEFAULT_SMPP_PARAMS, parseOptions } from '../../scripts/bench/options.js';
import { capReport } from '../../scripts/bench/scenarios.js';

describe('parseCopies (npm run bench -- --copies)', () => {
  type Case = [name: string, values: string[], all: number, perRole: Record<string, number>];
  const cases: Case[] = [
    ['nothing: one copy of everything', [], 1, {}],
    ['a number: every role', ['2'], 2, {}],
    ['one role', ['worker_sms=2'], 1, { worker_sms: 2 }],
    ['repeated', ['worker_sms=2', 'worker_status=3'], 1, { worker_sms: 2, worker_status: 3 }],
    ['comma-separated, with spaces', [' 2 , web=1 '], 2, { web: 1 }],
    ['a number and a role in separate flags', ['3', 'worker_webhooks=1'], 3, { worker_webhooks: 1 }],
    ['empty items are skipped', ['2,,'], 2, {}],
  ];
  for (const [name, values, all, perRole] of cases) {
    it(name, () => assert.deepEqual(parseCopies(values), { all, perRole }));
  }

  const errors: Array<[string, string[], RegExp]> = [
    ['zero', ['0'], /integer from 1 to 8/],
    ['too many', ['9'], /integer from 1 to 8/],
    ['not a number', ['two'], /integer from 1 to 8/],
    ['a fraction', ['worker_sms=1.5'], /worker_sms must be an integer/],
    ['a negative count', ['worker_sms=-1'], /worker_sms must be an integer/],
    ['no role name', ['=2'], /not a role name/],
    ['a role name that is not one', ['worker sms=2'], /not a role name/],
    ['a role twice', ['worker_sms=2,worker_sms=3'], /worker_sms is given twice/],
    ['every role twice', ['2', '3'], /given twice/],
  ];
  for (const [name, values, message] of errors) {
    it(`refuses ${name}`, () => assert.throws(() => parseCopies(values), message));
  }
});

describe('copies of roles', () => {
  const roles = ['web', 'worker_sms', 'worker_status'];

  it('per-role values win over the number for every role', () => {
    const spec = parseCopies(['2', 'web=1']);
    assert.equal(copiesOf(spec, 'web'), 1);
    assert.equal(copiesOf(spec, 'worker_sms'), 2);
    assert.deepEqual(copiesByRole(roles, spec), { web: 1, worker_sms: 2, worker_status: 2 });
  });

  it('expands in role order, copy 1 named as the role', () => {
    assert.deepEqual(expandCopies(roles, parseCopies(['worker_sms=3'])).map((c) => c.id),
      ['web', 'worker_sms', 'worker_sms#2', 'worker_sms#3', 'worker_status']);
    assert.deepEqual(expandCopies(['worker_sms'], parseCopies(['2']))[1], { id: 'worker_sms#2', role: 'worker_sms', copy: 2 });
  });

  it('hasCopies and unknownRoles', () => {
    assert.equal(hasCopies(parseCopies([])), false);
    assert.equal(hasCopies(parseCopies(['web=1'])), false);
    assert.equal(hasCopies(parseCopies(['worker_sms=2'])), true);
    assert.deepEqual(unknownRoles(parseCopies(['worker_smss=2', 'web=2']), roles), ['worker_smss']);
  });

  it('describes a copies map briefly', () => {
    assert.equal(describeCopies({ web: 1, worker_sms: 1 }), '1 each');
    assert.equal(describeCopies({ web: 2, worker_sms: 2, worker_status: 2 }), '2 each');
    assert.equal(describeCopies({ web: 1, worker_sms: 2, worker_status: 2 }), '2 each (web 1)');
    assert.equal(describeCopies({}), '1 each');
  });
});

describe('SMPP_URL query: tps', () => {
  it('sets or replaces tps and keeps the other keys', () => {
    assert.equal(withTps('window=50&tps=100000', 2000), 'window=50&tps=2000');
    assert.equal(withTps('window=50&submit_id=hex', 300), 'window=50&submit_id=hex&tps=300');
    assert.equal(withTps('', 10), 'tps=10');
  });
  it('reads tps (0 or absent: no cap)', () => {
    assert.equal(tpsOf('window=50&tps=2000'), 2000);
    assert.equal(tpsOf('window=50'), null);
    assert.equal(tpsOf('tps=0'), null);
  });
});

describe('parseOptions: what operators run (issue 23)', () => {
  it('defaults: a cap that does not bind, auto id forms, a simulator with decimal ids', () => {
    const o = parseOptions([]);
    assert.equal(o.smppParams, DEFAULT_SMPP_PARAMS);
    assert.equal(tpsOf(o.smppParams), 100_000);
    assert.doesNotMatch(o.smppParams, /submit_id|receipt_id/);
    assert.equal(o.smscIds, 'dec');
    assert.ok(o.scenarios.includes('e2e-smpp-capped'));
    assert.equal(o.killOne, false);
    assert.deepEqual(o.copies, { all: 1, perRole: {} });
  });
  it('the explicit configuration of the rounds before stays reachable', () => {
    const o = parseOptions(['--smpp-params', 'window=50&submit_id=hex&receipt_id=hex', '--smsc-ids', 'hex']);
    assert.equal(o.smppParams, 'window=50&submit_id=hex&receipt_id=hex');
    assert.equal(o.smscIds, 'hex');
  });
  it('the capped variant sends at most 20 s of the cap (quick: 4 s)', () => {
    assert.equal(parseOptions(['--cap-tps', '1000']).cappedRecipients, 20_000);
    assert.equal(parseOptions(['--cap-tps', '1000', '--recipients', '5000']).cappedRecipients, 5000);
    assert.equal(parseOptions(['--quick']).capTps, 250);
    assert.equal(parseOptions(['--quick']).cappedRecipients, 1000);
    assert.throws(() => parseOptions(['--cap-tps', '200000']), /bounded/);
  });
  it('--copies and --kill-one', () => {
    const o = parseOptions(['--copies', '2', '--copies', 'web=1', '--kill-one', '--no-baseline']);
    assert.deepEqual(o.copies, { all: 2, perRole: { web: 1 } });
    assert.equal(o.killOne, true);
    assert.equal(o.baseline, false);
    assert.throws(() => parseOptions(['--copies', '2', '--processes', 'all']), /processes of their own/);
    assert.throws(() => parseOptions(['--kill-one', '--processes', 'all']), /processes of their own/);
  });
});

describe('capReport (e2e-smpp-capped)', () => {
  it('rate between the first and last submit, whole seconds only for the peak', () => {
    // 2,001 submits over 2 s at a cap of 1,000; the last, partial second (1 submit) is left out.
    const r = capReport(1000, 2001, 10_000, 12_000, [1000, 1000, 1]);
    assert.deepEqual(r, { tps: 1000, submitsPerS: 1000, ofCap: 1, peakSecond: 1000, secondsAboveCap: 0, seconds: 2 });
  });
  it('counts the seconds above the cap', () => {
    const r = capReport(100, 301, 0, 2500, [130, 90, 81]);
    assert.equal(r.secondsAboveCap, 1);
    assert.equal(r.peakSecond, 130);
    assert.equal(r.submitsPerS, 120);
  });
});
