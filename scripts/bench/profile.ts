/**
 * Summarises V8 `.cpuprofile` files (written by `node --cpu-prof`, see `run.ts --cpu-prof`): self
 * time per function and per package/area, and inclusive time of the service's own functions.
 *
 *   node --import tsx scripts/bench/profile.ts <file.cpuprofile | directory> [--top 25]
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileRow {
  name: string;
  ms: number;
  /** Percent of the busy (non-idle) time. */
  pct: number;
}

export interface ProfileSummary {
  file: string;
  wallMs: number;
  busyMs: number;
  idleMs: number;
  gcMs: number;
  byArea: ProfileRow[];
  /**
   * Busy time by the nearest service file on the stack (the stage that did the work, its library
   * calls included); samples without one are async callbacks of a library (socket data, timers).
   */
  byStage: ProfileRow[];
  topSelf: ProfileRow[];
  /** Inclusive (on-stack) time of the service's own functions (dist/ files). */
  topInclusive: ProfileRow[];
}

/** A frame of the compiled service (dist/), not of a package that has its own dist/. */
const isOwn = (url: string) => url.includes('/dist/') && !url.includes('/node_modules/');

const SPECIAL = new Set(['(idle)', '(garbage collector)', '(program)', '(root)']);

function shortUrl(url: string): string {
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    return url.slice(nm + '/node_modules/'.length);
  }
  const dist = url.lastIndexOf('/dist/');
  if (dist >= 0) {
    return url.slice(dist + '/dist/'.length);
  }
  return url.replace(/^file:\/\//, '');
}

/** The package or area a frame belongs to: an npm package, a switchboard file, a node module, or GC/program. */
export function areaOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    return SPECIAL.has(functionName) ? functionName : '(native)';
  }
  if (url.startsWith('node:')) {
    const mod = url.slice(5);
    if (mod.startsWith('internal/')) {
      const parts = mod.split('/');
      return `node:${parts.slice(0, Math.min(parts.length, 3)).join('/').replace(/\.js$/, '')}`;
    }
    return `node:${mod}`;
  }
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const dist = url.lastIndexOf('/dist/');
  if (dist >= 0) {
    return `switchboard:${url.slice(dist + '/dist/'.length).replace(/\.js$/, '')}`;
  }
  return url;
}

function fnKey(frame: CallFrame): string {
  if (!frame.url) {
    return frame.functionName || '(anonymous)';
  }
  return `${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, busyUs: number, n: number): ProfileRow[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, ms: Math.round(us / 1000), pct: busyUs > 0 ? Math.round((us / busyUs) * 1000) / 10 : 0 }));
}

/**
 * `window`: only samples taken between these CLOCK_MONOTONIC instants (µs, as
 * `process.hrtime.bigint() / 1000n` in any process of the machine: V8's profile clock is the same).
 */
export function summariseProfile(file: string, topN = 25, window?: { fromUs: number; toUs: number }): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
  }
  for (const node of profile.nodes) {
    for (const child of node.children ?? []) {
      parent.set(child, node.id);
    }
  }
  const self = new Map<string, number>();
  const area = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let idle = 0;
  let gc = 0;
  let total = 0;
  const stage = new Map<string, number>();
  const stageCache = new Map<number, string>();
  const stageOf = (id: number): string => {
    const cached = stageCache.get(id);
    if (cached) {
      return cached;
    }
    let label: string | null = null;
    let outerPackage: string | null = null;
    const leaf = byId.get(id)!.callFrame;
    if (!leaf.url && SPECIAL.has(leaf.functionName)) {
      label = leaf.functionName;
    }
    for (let cur: number | undefined = id; cur !== undefined && label === null; cur = parent.get(cur)) {
      const frame = byId.get(cur)!.callFrame;
      if (isOwn(frame.url)) {
        const file = frame.url.slice(frame.url.lastIndexOf('/dist/') + '/dist/'.length).replace(/\.js$/, '');
        if (file !== 'shared/db/pool') {
          label = file;
        }
      } else if (frame.url.includes('/node_modules/')) {
        outerPackage = areaOf(frame);
      }
    }
    label ??= outerPackage ? `(callbacks of ${outerPackage})` : '(node internals: sockets, timers)';
    stageCache.set(id, label);
    return label;
  };
  // Inclusive sets are cached per leaf node: the stack of a node never changes.
  const stackCache = new Map<number, string[]>();
  const stackOf = (id: number): string[] => {
    const cached = stackCache.get(id);
    if (cached) {
      return cached;
    }
    const keys = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)!.callFrame;
      if (isOwn(frame.url)) {
        keys.add(fnKey(frame));
      }
    }
    const list = [...keys];
    stackCache.set(id, list);
    return list;
  };
  let clock = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    clock += profile.timeDeltas[i] ?? 0;
    const dt = profile.timeDeltas[i + 1] ?? 0;
    if (window && (clock < window.fromUs || clock > window.toUs)) {
      continue;
    }
    const frame = byId.get(id)?.callFrame;
    if (!frame) {
      continue;
    }
    total += dt;
    if (frame.functionName === '(idle)') {
      idle += dt;
      continue;
    }
    if (frame.functionName === '(garbage collector)') {
      gc += dt;
    }
    const k = fnKey(frame);
    self.set(k, (self.get(k) ?? 0) + dt);
    const a = areaOf(frame);
    area.set(a, (area.get(a) ?? 0) + dt);
    const st = stageOf(id);
    stage.set(st, (stage.get(st) ?? 0) + dt);
    for (const key of stackOf(id)) {
      inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
    }
  }
  const busy = total - idle;
  return {
    file,
    wallMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    idleMs: Math.round(idle / 1000),
    gcMs: Math.round(gc / 1000),
    byArea: top(area, busy, topN),
    byStage: top(stage, busy, topN),
    topSelf: top(self, busy, topN),
    topInclusive: top(inclusive, busy, topN),
  };
}

export function profileFiles(target: string): string[] {
  if (statSync(target).isDirectory()) {
    return readdirSync(target).filter((f) => f.endsWith('.cpuprofile')).sort().map((f) => path.join(target, f));
  }
  return [target];
}

export function formatProfile(s: ProfileSummary): string {
  const table = (title: string, rows: ProfileRow[]) =>
    [`  ${title}`, ...rows.map((r) => `    ${String(r.ms).padStart(7)} ms ${String(r.pct.toFixed(1)).padStart(5)} %  ${r.name}`)].join('\n');
  return [
    `${s.file}: ${s.wallMs} ms profiled, ${s.busyMs} ms busy (GC ${s.gcMs} ms), ${s.idleMs} ms idle`,
    table('busy time by service file on the stack (library calls included; % of busy)', s.byStage),
    table('self time by package / area (% of busy)', s.byArea),
    table('self time by function', s.topSelf),
    table('inclusive time of switchboard functions (synchronous part only)', s.topInclusive),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const topIndex = args.indexOf('--top');
  const topN = topIndex >= 0 ? Number(args[topIndex + 1]) || 25 : 25;
  const targets = args.filter((a, i) => a !== '--top' && (topIndex < 0 || i !== topIndex + 1));
  if (targets.length === 0) {
    process.stderr.write('usage: profile.ts <file.cpuprofile | dir> [--top N]\n');
    process.exit(2);
  }
  for (const target of targets) {
    for (const file of profileFiles(target)) {
      process.stdout.write(`${formatProfile(summariseProfile(file, topN))}\n\n`);
    }
  }
}
