/**
 * Copies of the service's roles (issue 23: scale-out per role), shared by the benchmark
 * (`--copies`) and the fault suite (its second copies of worker_sms and worker_status). Pure:
 * table-tested in test/unit/bench-copies.test.ts.
 *
 * `--copies 2` runs two copies of every role the harness may copy; `--copies worker_sms=3` three
 * of that role; both combine (`--copies 2 --copies worker_sms=3`, or comma-separated
 * `--copies 2,worker_sms=3`): the per-role value wins. A role left out runs once.
 */

export interface CopiesSpec {
  /** Copies of every role not named in `perRole` (1 when not given). */
  all: number;
  perRole: Record<string, number>;
}

/** At most this many copies of one role: the harness runs on one machine. */
export const MAX_COPIES = 8;

const ROLE = /^[A-Za-z][A-Za-z0-9_-]*$/;

function count(text: string, what: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(n) || n < 1 || n > MAX_COPIES) {
    throw new Error(`--copies: ${what} must be an integer from 1 to ${MAX_COPIES} (got "${text}")`);
  }
  return n;
}

/** Parses the values of (repeatable, comma-separated) `--copies`. */
export function parseCopies(values: readonly string[]): CopiesSpec {
  const spec: CopiesSpec = { all: 1, perRole: {} };
  let allSeen = false;
  for (const item of values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean)) {
    const eq = item.indexOf('=');
    if (eq < 0) {
      if (allSeen) {
        throw new Error(`--copies: the number of copies of every role is given twice ("${item}")`);
      }
      allSeen = true;
      spec.all = count(item, 'N');
      continue;
    }
    const role = item.slice(0, eq).trim();
    if (!ROLE.test(role)) {
      throw new Error(`--copies: "${role}" is not a role name (ROLE=N, e.g. worker_sms=2)`);
    }
    if (role in spec.perRole) {
      throw new Error(`--copies: ${role} is given twice`);
    }
    spec.perRole[role] = count(item.slice(eq + 1).trim(), role);
  }
  return spec;
}

/** Copies of `role` under `spec`. */
export function copiesOf(spec: CopiesSpec, role: string): number {
  return spec.perRole[role] ?? spec.all;
}

/** True when some role runs more than once. */
export function hasCopies(spec: CopiesSpec): boolean {
  return spec.all > 1 || Object.values(spec.perRole).some((n) => n > 1);
}

/** Roles named in `spec` that are not among `roles` (an error: a typo would silently copy nothing). */
export function unknownRoles(spec: CopiesSpec, roles: readonly string[]): string[] {
  return Object.keys(spec.perRole).filter((r) => !roles.includes(r));
}

/** The copies of `roles` in start order, each with its process id: `worker_sms`, `worker_sms#2`, … */
export function expandCopies(roles: readonly string[], spec: CopiesSpec): Array<{ id: string; role: string; copy: number }> {
  const out: Array<{ id: string; role: string; copy: number }> = [];
  for (const role of roles) {
    const n = copiesOf(spec, role);
    for (let k = 1; k <= n; k++) {
      out.push({ id: k === 1 ? role : `${role}#${k}`, role, copy: k });
    }
  }
  return out;
}

/** `{ worker_sms: 2, web: 1 }` for the report: every role with its copies. */
export function copiesByRole(roles: readonly string[], spec: CopiesSpec): Record<string, number> {
  return Object.fromEntries(roles.map((r) => [r, copiesOf(spec, r)]));
}

/** Short text of a copies map: `1 each`, `2 each`, `2 each (web 1)`. */
export function describeCopies(byRole: Record<string, number>): string {
  const counts = Object.values(byRole);
  if (counts.length === 0) {
    return '1 each';
  }
  const tally = new Map<number, number>();
  for (const n of counts) {
    tally.set(n, (tally.get(n) ?? 0) + 1);
  }
  const common = [...tally].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]![0];
  const others = Object.entries(byRole).filter(([, n]) => n !== common).map(([r, n]) => `${r} ${n}`);
  return `${common} each${others.length ? ` (${others.join(', ')})` : ''}`;
}

/**
 * `params` (an SMPP_URL query) with its `tps` set to `tps` (added when absent, replaced when
 * present); the other keys keep their order.
 */
export function withTps(params: string, tps: number): string {
  const q = new URLSearchParams(params.replace(/^\?/, ''));
  q.set('tps', String(tps));
  return q.toString();
}

/** The `tps` of an SMPP_URL query, or null when it has none (or 0: no cap). */
export function tpsOf(params: string): number | null {
  const raw = new URLSearchParams(params.replace(/^\?/, '')).get('tps');
  const n = raw === null ? Number.NaN : Number(raw);
  return Number.isFinite(n) && n > 0 ? n : null;
}
