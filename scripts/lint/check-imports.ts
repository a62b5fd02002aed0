/**
 * `npm run lint` (with ESLint): the layering rules of docs/architecture.md, checked on the import
 * graph of the production code (type-only imports included: a cycle of types is a cycle of ideas).
 *
 * - `shared/` imports neither the HTTP layer (`api/`), the worker pools (`workers/`), the process
 *   start modules (`services/`), `bin/` nor `scripts/`;
 * - `api/` and `workers/` do not import each other, nor `services/`;
 * - no import cycles anywhere.
 *
 * Prints each problem and exits 1 when there is one.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOTS = ['api', 'shared', 'workers', 'services', 'bin'];
const FORBIDDEN: Record<string, string[]> = {
  shared: ['api', 'workers', 'services', 'bin', 'scripts'],
  api: ['workers', 'services', 'bin', 'scripts'],
  workers: ['api', 'services', 'bin', 'scripts'],
  services: ['bin', 'scripts'],
};
const IMPORT_RE = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;

function filesUnder(dir: string): string[] {
  let out: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) out = out.concat(filesUnder(full));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const dir of ROOTS) {
    for (const file of filesUnder(path.join(root, dir))) {
      const rel = path.relative(root, file);
      const text = readFileSync(file, 'utf8');
      const targets: string[] = [];
      for (const m of text.matchAll(IMPORT_RE)) {
        const target = path.normalize(path.join(path.dirname(rel), m[1]!.replace(/\.js$/, '.ts')));
        targets.push(target);
      }
      graph.set(rel, targets);
    }
  }
  return graph;
}

/** Strongly connected components with more than one file (or a file importing itself): the cycles. */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    indexOf.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!indexOf.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, indexOf.get(w)!));
      }
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indexOf.has(v)) visit(v);
  return found;
}

export function layerViolations(graph: Map<string, string[]>): string[] {
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const layer = file.split(path.sep)[0]!;
    for (const target of targets) {
      const targetLayer = target.split(path.sep)[0]!;
      if (FORBIDDEN[layer]?.includes(targetLayer)) problems.push(`${file} imports ${target} (${layer}/ must not import ${targetLayer}/)`);
    }
  }
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const graph = importGraph(process.cwd());
  const problems = layerViolations(graph);
  for (const c of cycles(graph)) problems.push(`import cycle: ${c.join(' <-> ')}`);
  for (const p of problems) console.error(p);
  if (problems.length > 0) process.exit(1);
  console.log(`imports: ${graph.size} files, layers respected, no cycles`);
}
