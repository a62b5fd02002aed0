/**
 * A parser of the Prometheus text exposition format (version 0.0.4) strict enough to catch a
 * malformed scrape: every sample line must parse, belong to a family announced by `# TYPE` (a
 * histogram's `_bucket`, `_sum` and `_count`, a summary's quantiles), and carry a number.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
  samples: Sample[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const m = LABEL.exec(text);
    if (!m) throw new Error(`bad labels in: ${line}`);
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
  }
  return labels;
}

function parseValue(text: string, line: string): number {
  // As Prometheus reads them (Go's ParseFloat): Inf and NaN in any case (prom-client writes `Nan`).
  if (/^\+?inf$/i.test(text)) return Infinity;
  if (/^-inf$/i.test(text)) return -Infinity;
  if (/^nan$/i.test(text)) return NaN;
  const n = Number(text);
  if (Number.isNaN(n)) throw new Error(`bad value in: ${line}`);
  return n;
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('# HELP ')) {
      const [, name, ...help] = line.split(' ').slice(1);
      helps.set(name ?? '', help.join(' '));
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      if (!name || !['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(type ?? '')) throw new Error(`bad TYPE line: ${line}`);
      families.set(name, { name, type: type as Family['type'], help: helps.get(name) ?? '', samples: [] });
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const name = m[1]!;
    const family = families.get(name)
      ?? families.get(name.replace(/_(bucket|sum|count)$/, ''))
      ?? families.get(name.replace(/_total$/, ''));
    if (!family) throw new Error(`sample of an undeclared family: ${line}`);
    family.samples.push({ name, labels: m[3] ? parseLabels(m[3], line) : {}, value: parseValue(m[4]!, line) });
  }
  return families;
}

/** The sum of a family's samples named `name` whose labels include `match`. */
export function total(families: Map<string, Family>, name: string, match: Record<string, string> = {}, sampleName = name): number {
  const family = families.get(name);
  if (!family) return 0;
  return family.samples
    .filter((s) => s.name === sampleName && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}
