/**
 * The fault suite's pure rules (table-tested in test/unit/fault-plan.test.ts): how the Procfile's
 * lines become commands, which outcome each campaign number is meant to have, and the seeded order
 * and timing of the faults.
 */

// ---------------------------------------------------------------------------------------------
// Procfile
// ---------------------------------------------------------------------------------------------

/** How one Procfile role is started: node with arguments, or a shell line run as it is. */
export type RoleCommand =
  | { role: string; kind: 'node'; args: string[] }
  | { role: string; kind: 'shell'; line: string };

/**
 * Reads the Procfile as a process manager would run it. `web: npm run start:web` is resolved through
 * package.json's scripts to `exec bash scripts/start.sh web`, which runs
 * `node $(cat scripts/node-flags) dist/bin/switchboard.js web` (the compiled service; the suite
 * builds once, so start.sh's own build check is not needed). Any other command (for example
 * `node $(cat scripts/node-flags) dist/bin/switchboard.js web`) is run by `sh -c` as it is.
 */
export function resolveProcfile(procfile: string, scripts: Record<string, string>, nodeFlags: string[], entry: string): RoleCommand[] {
  const out: RoleCommand[] = [];
  for (const raw of procfile.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) {
      continue;
    }
    const m = /^([A-Za-z0-9_-]+):\s*(.+)$/.exec(line);
    if (!m) {
      throw new Error(`Procfile: cannot read the line "${line}"`);
    }
    const role = m[1]!;
    const command = m[2]!.trim();
    const npm = /^npm run (\S+)((?:\s+--)?(?:\s+.*)?)$/.exec(command);
    if (!npm) {
      out.push({ role, kind: 'shell', line: command });
      continue;
    }
    const script = scripts[npm[1]!];
    if (script === undefined) {
      throw new Error(`Procfile: ${role} runs "npm run ${npm[1]}", which package.json does not define`);
    }
    const start = /^(?:exec\s+)?bash scripts\/start\.sh(?:\s+(.*))?$/.exec(script.trim());
    if (!start) {
      out.push({ role, kind: 'shell', line: script });
      continue;
    }
    const extra = (npm[2] ?? '').replace(/^\s*--/, '').trim();
    const args = [...(start[1] ?? 'all').trim().split(/\s+/), ...(extra ? extra.split(/\s+/) : [])];
    out.push({ role, kind: 'node', args: [...nodeFlags, entry, ...args] });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The campaign's numbers and their outcomes (the SMSC simulator decides by the last two digits)
// ---------------------------------------------------------------------------------------------

export type FinalResult = 'delivered' | 'undelivered' | 'failed' | 'rejected' | 'sent';

/**
 * Last two digits of campaign recipient i: per 100, 2 undelivered (01), 1 refused at submit (02,
 * ESME_RSYSERR: failed and refunded), 1 without a receipt (03: stays sent), 1 delivered after 5 s
 * (04), 1 rejected by its receipt (05); the other 94 delivered (endings 10-19).
 */
export function campaignEnding(i: number): string {
  switch (i % 100) {
    case 1:
    case 51:
      return '01';
    case 2:
      return '02';
    case 3:
      return '03';
    case 4:
      return '04';
    case 5:
      return '05';
    default:
      return `1${i % 10}`;
  }
}

const pad6 = (i: number) => String(i).padStart(6, '0');
/** E.164 digits of campaign recipient i (a Czech mobile number; i < 1,000,000). */
export const campaignPhone = (i: number) => `4207${pad6(i)}${campaignEnding(i)}`;
/** Priority message j: a range of its own, always delivered. */
export const priorityPhone = (j: number) => `4206${pad6(j)}10`;
/** Recipient k of the scheduled messages: a range of its own, always delivered. */
export const scheduledPhone = (k: number) => `4205${pad6(k)}1${k % 10}`;

/**
 * When the scheduled messages come due (ms after the campaign started): one every `everyMs` from
 * `firstMs` (a send time more than 60 s ahead is scheduled; nearer ones are sent at once) to
 * `endMs`. Their delayed dispatch jobs fall due while the faults of that time last.
 */
export function scheduledDueTimes(firstMs: number, endMs: number, everyMs: number): number[] {
  const out: number[] = [];
  for (let t = firstMs; t <= endMs; t += everyMs) {
    out.push(t);
  }
  return out;
}

export function expectedFinal(phone: string): FinalResult {
  switch (phone.slice(-2)) {
    case '01':
      return 'undelivered';
    case '02':
      return 'failed';
    case '03':
      return 'sent';
    case '05':
      return 'rejected';
    default:
      return 'delivered';
  }
}

/** The webhook results a recipient of this number gets, in order. */
export function expectedResults(phone: string): string[] {
  const final = expectedFinal(phone);
  switch (final) {
    case 'failed':
      return ['sending', 'failed'];
    case 'sent':
      return ['sending', 'sent'];
    default:
      return ['sending', 'sent', final];
  }
}

/** Results that end an attempt; a recipient should get exactly one of them. */
export const FINAL_RESULTS: ReadonlySet<string> = new Set(['delivered', 'undelivered', 'failed', 'rejected']);

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

export const INFRA_FAULTS = ['redis', 'postgres', 'smsc', 'receiver'] as const;
export type InfraFault = (typeof INFRA_FAULTS)[number];

export interface FaultTiming {
  /** First fault this long after the campaign started. */
  firstAtMs: number;
  /** Pause after a fault was undone before the next one, drawn from [min, max]. */
  gapMs: readonly [number, number];
  /** How long a killed role stays down before it is restarted, drawn from [min, max]. */
  killDownMs: readonly [number, number];
  redisDownMs: readonly [number, number];
  postgresDownMs: number;
  smscDownMs: number;
  receiverDownMs: number;
}

export interface PlannedFault {
  name: string;
  kind: 'kill' | InfraFault;
  /** Planned start, ms after the campaign started. */
  atMs: number;
  /** How long the fault lasts before it is undone. */
  downMs: number;
  /** Which copy of a role with several processes is killed. */
  copy: number;
}

/** A small seeded generator (mulberry32): the same seed gives the same plan. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The faults in a seeded order, one after another: each starts when the one before was undone and
 * a seeded pause passed. `copies` says how many processes a role has (a kill picks one of them).
 */
export function planFaults(
  names: readonly string[], seed: number, timing: FaultTiming, copies: Record<string, number>, notBeforeMs: Record<string, number> = {},
): PlannedFault[] {
  const random = seededRandom(seed);
  const between = ([min, max]: readonly [number, number]) => Math.round(min + random() * (max - min));
  const order = [...names];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const drawn = order.map((name) => {
    const kind: PlannedFault['kind'] = (INFRA_FAULTS as readonly string[]).includes(name) ? (name as InfraFault) : 'kill';
    const downMs = kind === 'kill' ? between(timing.killDownMs)
      : kind === 'redis' ? between(timing.redisDownMs)
        : kind === 'postgres' ? timing.postgresDownMs
          : kind === 'smsc' ? timing.smscDownMs
            : timing.receiverDownMs;
    return { name, kind, downMs, copy: Math.floor(random() * (copies[name] ?? 1)), gapMs: between(timing.gapMs) };
  });
  const schedule = () => {
    let at = timing.firstAtMs;
    return drawn.map(({ gapMs, ...f }) => {
      const planned: PlannedFault = { ...f, atMs: at };
      at += f.downMs + gapMs;
      return planned;
    });
  };
  // A fault that must not come too early moves later in the order, one place at a time.
  for (let moves = 0, i = 0; i < drawn.length - 1 && moves < drawn.length ** 2; i++) {
    const limit = notBeforeMs[drawn[i]!.name];
    if (limit !== undefined && schedule()[i]!.atMs < limit) {
      [drawn[i], drawn[i + 1]] = [drawn[i + 1]!, drawn[i]!];
      moves++;
    }
  }
  return schedule();
}

/**
 * How many campaign calls each burst sends: one burst at the start and one before each fault, so
 * that every fault meets a backlog in flight (a campaign paced evenly over minutes leaves each
 * fault only a few messages to disturb). Split as evenly as possible; earlier bursts take the rest.
 */
export function burstSizes(calls: number, faults: number): number[] {
  const bursts = faults + 1;
  const per = Math.floor(calls / bursts);
  return Array.from({ length: bursts }, (_, b) => per + (b < calls % bursts ? 1 : 0));
}

/** When the last fault of a plan is undone (ms after the campaign started). */
export function planEndMs(plan: readonly PlannedFault[]): number {
  return plan.reduce((end, f) => Math.max(end, f.atMs + f.downMs), 0);
}
