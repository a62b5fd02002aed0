/** The short table printed at the end of a run (Markdown, so it can go into docs/benchmarks.md as is). */
import type { ScenarioResult } from './scenarios.js';
import { describeCopies } from './copies.js';
import { describeProbe, type MachineProbe } from './machine-probe.js';

type Any = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- results are plain JSON

const num = (x: unknown) => (typeof x === 'number' ? x.toLocaleString('en-US') : '-');
const lat = (p: Any | undefined) => (p && p.n ? `${p.p50} / ${p.p99}` : '-');
const cost = (c: Any | undefined) => (c ? `${num(c.service)} + ${num(c.postgres)} + ${num(c.redis)} = **${num(c.total)}**` : '-');
/** The service process whose RSS grew the most (with several processes, its name too). */
const rss = (list: Any[] | undefined) => {
  const services = (list ?? []).filter((x) => String(x.name).startsWith('service'));
  const s = services.reduce<Any | undefined>((worst, x) => (!worst || x.ratio > worst.ratio ? x : worst), undefined);
  const label = services.length > 1 ? `${String(s?.name).replace(/^service\./, '')}: ` : '';
  return s ? `${label}${s.firstQuarterMiB} → ${s.lastQuarterMiB} MiB (×${s.ratio})` : '-';
};

function row(r: ScenarioResult): string[] {
  const x = r as Any;
  const noise = typeof x.cpu?.cores?.otherOnMachine === 'number' ? String(x.cpu.cores.otherOnMachine) : '-';
  return [...cells(r, x), noise, describeProbe(x.machineProbe as MachineProbe | null | undefined)];
}

/** `smpp; window=50&tps=100000, dec ids; copies 2 each; …`: the configuration a figure is for. */
function config(x: Any): string {
  const parts = [String(x.carrier ?? '')];
  if (x.smppParams !== undefined && x.smppParams !== null) {
    parts.push(`${x.smppParams === '' ? 'no query' : x.smppParams}, ${x.smscIds} ids`);
  }
  const copies = x.copies && typeof x.copies === 'object' ? describeCopies(x.copies as Record<string, number>) : null;
  if (copies && copies !== '1 each') {
    parts.push(`copies ${copies}`);
  }
  if (Array.isArray(x.killed)) {
    parts.push(`killed ${(x.killed as Any[]).map((k) => `${k.id} at ${k.atS} s`).join(', ') || 'none'}`);
  }
  return parts.filter(Boolean).join('; ');
}

function cells(r: ScenarioResult, x: Any): string[] {
  const check = r.skipped ? 'skipped' : r.ok ? 'ok' : `**FAILED**${r.notes.length ? `: ${String(r.notes[0]).split('\n')[0]!.slice(0, 120)}` : ''}`;
  switch (r.scenario) {
    case 'accept':
      return ['accept', `**${num(x.recipientsPerS)} recipients/s** (${num(x.requestsPerS)} requests/s, ${x.concurrency} in flight, ${x.role} process)`,
        lat(x.latencyMs), cost(x.cpuUsPerRecipient), rss(x.rss), check];
    case 'e2e-smpp':
    case 'e2e-smpp-capped':
      return [`${r.scenario} (${config(x)})`,
        `${num(x.recipients)} recipients${x.warmup ? ` (after a warm-up of ${num(x.warmup.recipients)})` : ''}, last event after ${x.secondsUntil?.lastEvent} s: **${num(x.recipientsPerSEndToEnd)} recipients/s end to end**` +
        `${typeof x.vsOneCopy === 'number' ? ` (×${x.vsOneCopy} one copy's ${num(x.oneCopyRecipientsPerS)}` +
          `${typeof x.vsOneCopyPerSimulatorUs === 'number' ? `; ×${x.vsOneCopyPerSimulatorUs} scaled by the simulator's µs per recipient` : ''})` : ''}; ` +
        `${x.cap ? `**submits ${num(x.cap.submitsPerS)}/s against a cap of ${num(x.cap.tps)} (×${x.cap.ofCap}; busiest second ${num(x.cap.peakSecond)})**; ` : ''}` +
        `accepted ${num(x.acceptedPerS)}/s, submits ${num(x.submitsPerS)}/s, receipts applied ${num(x.receiptsAppliedPerS)}/s, ` +
        `webhook events ${num(x.webhookEventsPerS)}/s (${x.check?.ok}/${x.check?.recipients} recipients exactly right` +
        `${x.submitCheck ? `, ${x.submitCheck.repeated} submitted twice` : ''}${x.charges ? `, charges ${x.charges.passed ? 'right' : '**wrong**'}` : ''})`,
        `accept ${lat(x.acceptLatencyMs)}`, cost(x.cpuUsPerRecipient), rss(x.rss), check];
    case 'e2e-kannel':
      return r.skipped ? ['e2e-kannel', '-', '-', '-', '-', check]
        : [`e2e-kannel (Kannel 1.4.5; throughput 100000, max-pending-submits 50, ${x.smscIds} ids, dlr-mask ${x.dlrMask}, storage ${x.storage})`,
          `${num(x.recipients)} recipients${x.warmup ? ` (after a warm-up of ${num(x.warmup.recipients)})` : ''}, ` +
          `${x.dlrMask ? `last report after ${x.secondsUntil?.lastEvent}` : `no reports asked for: last submit_sm after ${x.secondsUntil?.lastSubmit}`} s: ` +
          `**${num(x.recipientsPerSEndToEnd)} recipients/s end to end**` +
          `${typeof x.serviceVsKannel === 'number' ? ` (e2e-smpp of this run: ${num(x.serviceRecipientsPerS)}/s, **×${x.serviceVsKannel}**)` : ''}; ` +
          `accepted ${num(x.acceptedPerS)}/s, submits ${num(x.submitsPerS)}/s` +
          `${x.check ? `, delivery reports ${num(x.reportsPerS)}/s (${x.check.ok}/${x.check.recipients} recipients exactly right)` : ''}` +
          ` (${num(x.submitRepeats)} submitted twice)`,
          `sendsms ${lat(x.acceptLatencyMs)}`, cost(x.cpuUsPerRecipient), rss(x.rss), check];
    case 'e2e-whatsapp':
      return ['e2e-whatsapp',
        `${num(x.recipients)} recipients${x.warmup ? ` (after a warm-up of ${num(x.warmup.recipients)})` : ''}, last event after ${x.secondsUntil?.lastEvent} s: **${num(x.recipientsPerSEndToEnd)} recipients/s end to end**; ` +
        `accepted ${num(x.acceptedPerS)}/s, Graph sends ${num(x.graphSendsPerS)}/s, webhook events ${num(x.webhookEventsPerS)}/s ` +
        `(${x.check?.ok}/${x.check?.recipients} recipients exactly right)`,
        `accept ${lat(x.acceptLatencyMs)}`, cost(x.cpuUsPerRecipient), rss(x.rss), check];
    case 'e2e-viber':
      return ['e2e-viber (simulator)',
        `${num(x.recipients)} recipients${x.warmup ? ` (after a warm-up of ${num(x.warmup.recipients)})` : ''}, last event after ${x.secondsUntil?.lastEvent} s: **${num(x.recipientsPerSEndToEnd)} recipients/s end to end**; ` +
        `accepted ${num(x.acceptedPerS)}/s, sends ${num(x.sendsPerS)}/s, webhook events ${num(x.webhookEventsPerS)}/s (${x.check?.ok}/${x.check?.recipients} recipients exactly right)`,
        `accept ${lat(x.acceptLatencyMs)}`, cost(x.cpuUsPerRecipient), rss(x.rss), check];
    case 'priority-under-load':
      return [`priority-under-load (${x.carrier}${x.variant ? `; ${x.variant}` : ''})`, `${x.matched}/${x.messages} priority messages, accept → ${x.carrier === 'smpp' ? 'submit_sm' : 'hand-over'}`,
        lat(x.acceptToSubmitMs), '-', '-', check];
    case 'webhooks':
      return [`webhooks, ${x.phase}`, `**${num(x.eventsPerS)} events/s** (${num(x.events)} events, ${x.eventsPerPost} per POST` +
        `${x.fastReceivers ? `; fast receivers done after ${x.fastReceivers.seconds} s, slow one after ${x.slowReceiver?.seconds} s` : ''})`,
        '-', cost(x.cpuUsPerEvent), '-', check];
    case 'verify':
      return r.skipped ? ['verify', '-', '-', '-', '-', check]
        : ['verify (sandbox)', `**${num(x.startsPerS)} starts/s** (${num(x.started)} started, ${x.concurrency} in flight)`, lat(x.latencyMs),
          cost(x.cpuUsPerStart), rss(x.rss), check];
    default:
      return [r.scenario, '-', '-', '-', '-', check];
  }
}

export function formatTable(results: ScenarioResult[], env: Record<string, unknown>): string {
  const head = ['scenario', 'throughput', 'latency p50 / p99 ms', 'CPU µs per unit: service + postgres + redis = total',
    'service RSS 1st → last quarter (largest growth)', 'check', 'other load (cores)',
    'machine probe before (scripts/bench/machine-probe.ts)'];
  const rows = results.map(row);
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    `${String(env.nproc)} cores, ${String(env.memoryGiB)} GiB; node ${String(env.node)}, postgres ${String(env.postgres)}, redis ${String(env.redis)}; ${String(env.command)}`,
    `SMPP_URL query "${String(env.smppParams)}", simulator ids ${String(env.smscIds)}; processes ${String(env.processes)}` +
      `${env.copies && typeof env.copies === 'object' ? `, copies ${describeCopies(env.copies as Record<string, number>)}` : ''}${env.killOne ? ', --kill-one' : ''}`,
    '',
    line(head),
    line(head.map(() => '---')),
    ...rows.map(line),
  ].join('\n');
}
