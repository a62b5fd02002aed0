import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  burstSizes,
  campaignEnding,
  campaignPhone,
  expectedFinal,
  expectedResults,
  planEndMs,
  planFaults,
  priorityPhone,
  resolveProcfile,
  type FaultTiming,
} from '../../scripts/faults/plan.js';

const FLAGS = ['--enable-source-maps'];
const ENTRY = 'dist/bin/switchboard.js';

describe('resolveProcfile', () => {
  const scripts = {
    'start:web': 'bash scripts/start.sh web',
    'start:worker:sms': 'exec bash scripts/start.sh worker --pools=sms --lanes=transactional,promotional',
    'start:other': 'node somewhere.js',
  };
  type Case = [name: string, procfile: string, expected: ReturnType<typeof resolveProcfile>];
  const cases: Case[] = [
    ['npm script through start.sh', 'web: npm run start:web', [{ role: 'web', kind: 'node', args: [...FLAGS, ENTRY, 'web'] }]],
    ['exec start.sh (as package.json has it) with pools and lanes', 'worker_sms: npm run start:worker:sms',
      [{ role: 'worker_sms', kind: 'node', args: [...FLAGS, ENTRY, 'worker', '--pools=sms', '--lanes=transactional,promotional'] }]],
    ['arguments after -- are appended', 'w: npm run start:web -- --pools=relay',
      [{ role: 'w', kind: 'node', args: [...FLAGS, ENTRY, 'web', '--pools=relay'] }]],
    ['a script that is not start.sh runs in a shell', 'x: npm run start:other', [{ role: 'x', kind: 'shell', line: 'node somewhere.js' }]],
    ['a direct command runs in a shell as it is', 'web: node $(cat scripts/node-flags) dist/bin/switchboard.js web',
      [{ role: 'web', kind: 'shell', line: 'node $(cat scripts/node-flags) dist/bin/switchboard.js web' }]],
    ['blank lines and comments are skipped', '\n# comment\nweb: npm run start:web\n\n', [{ role: 'web', kind: 'node', args: [...FLAGS, ENTRY, 'web'] }]],
  ];
  for (const [name, procfile, expected] of cases) {
    it(name, () => assert.deepEqual(resolveProcfile(procfile, scripts, FLAGS, ENTRY), expected));
  }

  it('refuses a script package.json does not define', () => {
    assert.throws(() => resolveProcfile('web: npm run nope', scripts, FLAGS, ENTRY), /does not define/);
  });

  it("reads this repository's Procfile: every role, each a node command of the build", () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
    const roles = resolveProcfile(readFileSync('Procfile', 'utf8'), pkg.scripts, FLAGS, ENTRY);
    assert.ok(roles.length >= 6);
    assert.ok(roles.some((r) => r.role === 'web'));
    for (const r of roles) {
      assert.ok(r.kind === 'shell' || r.args.includes(ENTRY), r.role);
    }
  });
});

describe('campaign numbers and outcomes', () => {
  type Case = [ending: string, final: string, results: string[]];
  const cases: Case[] = [
    ['01', 'undelivered', ['sending', 'sent', 'undelivered']],
    ['02', 'failed', ['sending', 'failed']],
    ['03', 'sent', ['sending', 'sent']],
    ['04', 'delivered', ['sending', 'sent', 'delivered']],
    ['05', 'rejected', ['sending', 'sent', 'rejected']],
    ['17', 'delivered', ['sending', 'sent', 'delivered']],
  ];
  for (const [ending, final, results] of cases) {
    it(`a number ending ${ending} ends ${final}`, () => {
      assert.equal(expectedFinal(`42077712${ending}`), final);
      assert.deepEqual(expectedResults(`42077712${ending}`), results);
    });
  }

  it('mixes outcomes per hundred recipients: 95 delivered (one late), 2 undelivered, one of each other', () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 100; i++) {
      const f = expectedFinal(campaignPhone(i));
      counts.set(f, (counts.get(f) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(counts), { delivered: 95, undelivered: 2, failed: 1, sent: 1, rejected: 1 });
    assert.equal(campaignEnding(4), '04'); // delivered late: counted with delivered
  });

  it('gives distinct 12-digit Czech numbers, priority numbers apart', () => {
    const phones = new Set(Array.from({ length: 1000 }, (_, i) => campaignPhone(i)));
    assert.equal(phones.size, 1000);
    assert.match(campaignPhone(123), /^4207\d{8}$/);
    assert.match(priorityPhone(5), /^4206\d{8}$/);
  });
});

describe('planFaults', () => {
  const timing: FaultTiming = {
    firstAtMs: 5000, gapMs: [1000, 2000], killDownMs: [500, 800], redisDownMs: [300, 400], postgresDownMs: 15_000, smscDownMs: 3000, receiverDownMs: 60_000,
  };
  const names = ['web', 'worker_sms', 'redis', 'postgres', 'smsc', 'receiver'];

  it('is the same for the same seed and differs for another', () => {
    const a = planFaults(names, 42, timing, { worker_sms: 2 });
    assert.deepEqual(planFaults(names, 42, timing, { worker_sms: 2 }), a);
    assert.notDeepEqual(planFaults(names, 43, timing, { worker_sms: 2 }).map((f) => f.name), a.map((f) => f.name));
  });

  it('runs every fault once, one after another, with the durations of its kind', () => {
    const plan = planFaults(names, 7, timing, { worker_sms: 2 });
    assert.deepEqual([...plan.map((f) => f.name)].sort(), [...names].sort());
    assert.equal(plan[0]!.atMs, 5000);
    for (let i = 1; i < plan.length; i++) {
      const gap = plan[i]!.atMs - (plan[i - 1]!.atMs + plan[i - 1]!.downMs);
      assert.ok(gap >= 1000 && gap <= 2000, `gap ${gap}`);
    }
    const by = Object.fromEntries(plan.map((f) => [f.name, f]));
    assert.equal(by.postgres!.downMs, 15_000);
    assert.equal(by.receiver!.downMs, 60_000);
    assert.equal(by.smsc!.downMs, 3000);
    assert.ok(by.web!.downMs >= 500 && by.web!.downMs <= 800);
    assert.ok(by.redis!.downMs >= 300 && by.redis!.downMs <= 400);
    assert.equal(by.web!.kind, 'kill');
    assert.equal(by.redis!.kind, 'redis');
    assert.ok(by.worker_sms!.copy === 0 || by.worker_sms!.copy === 1);
    assert.equal(by.web!.copy, 0);
    const last = plan[plan.length - 1]!;
    assert.equal(planEndMs(plan), last.atMs + last.downMs);
  });
});

describe('planFaults with a fault that must not come early', () => {
  const timing: FaultTiming = {
    firstAtMs: 5000, gapMs: [1000, 1000], killDownMs: [1000, 1000], redisDownMs: [1000, 1000], postgresDownMs: 15_000, smscDownMs: 1000, receiverDownMs: 1000,
  };
  const names = ['web', 'worker_sms', 'worker_status', 'redis', 'postgres', 'smsc'];

  it('moves it later in the order until it starts after the limit, keeping the others in their order', () => {
    for (let seed = 0; seed < 50; seed++) {
      const free = planFaults(names, seed, timing, {});
      const held = planFaults(names, seed, timing, {}, { postgres: 12_000 });
      const pg = held.find((f) => f.name === 'postgres')!;
      assert.ok(pg.atMs >= 12_000, `seed ${seed}: postgres at ${pg.atMs}`);
      assert.deepEqual(held.filter((f) => f.name !== 'postgres').map((f) => f.name), free.filter((f) => f.name !== 'postgres').map((f) => f.name));
    }
  });

  it('puts it last when no place is late enough', () => {
    const plan = planFaults(names, 1, timing, {}, { postgres: 1_000_000 });
    assert.equal(plan[plan.length - 1]!.name, 'postgres');
  });
});

describe('burstSizes', () => {
  it('splits the calls into one burst more than there are faults, the earlier bursts taking the remainder', () => {
    assert.deepEqual(burstSizes(8, 2), [3, 3, 2]);
    assert.deepEqual(burstSizes(200, 10), [19, 19, 18, 18, 18, 18, 18, 18, 18, 18, 18]);
    assert.deepEqual(burstSizes(2, 0), [2]);
    assert.equal(burstSizes(30, 10).reduce((a, b) => a + b, 0), 30);
  });
});
