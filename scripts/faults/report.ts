/** Plain-text tables of the fault suite's results. */
import type { CheckRow } from './checks.js';

export function table(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, c) => Math.max(...cells.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]) => r.map((v, c) => (c === r.length - 1 ? v : v.padEnd(widths[c]!))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

function wrap(text: string, width: number, indent: string): string {
  const words = text.split(' ');
  const lines: string[] = [];
  let current = '';
  for (const w of words) {
    if (current && current.length + 1 + w.length > width) {
      lines.push(current);
      current = w;
    } else {
      current = current ? `${current} ${w}` : w;
    }
  }
  if (current) {
    lines.push(current);
  }
  return lines.map((l) => `${indent}${l}`).join('\n');
}

export function formatChecks(rows: CheckRow[]): string {
  return rows.map((r) => {
    const head = `${r.verdict.padEnd(4)}  ${r.check}`;
    const detail = wrap(r.detail, 110, '      ');
    const examples = (r.examples ?? []).map((e) => wrap(`e.g. ${e}`, 110, '        ')).join('\n');
    return [head, detail, examples].filter(Boolean).join('\n');
  }).join('\n');
}

export const seconds = (ms: number | null | undefined) => (ms === null || ms === undefined ? '-' : (ms / 1000).toFixed(1));
