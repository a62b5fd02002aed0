/**
 * Prometheus metrics (prom-client) of a process: one registry per process, scraped at `/metrics`
 * of the web process and of any process's METRICS_PORT listener.
 *
 * The send path pays nothing measurable for them: per recipient or per event it only adds one to
 * a plain number (no label set looked up, no clock read); those numbers become counters when a
 * scrape collects them. Clocks are read per HTTP request, per webhook POST and for one SMPP submit
 * in SUBMIT_SAMPLE_EVERY; queue depths are read from Redis on scrape only.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { CHANNELS, type AttemptState, type Channel } from './channels/index.js';
import { getOrMake } from './collections.js';
import { presentedCredential } from './auth-header.js';

const ATTEMPT_STATES: readonly AttemptState[] = ['sending', 'sent', 'delivered', 'seen', 'undelivered', 'rejected', 'failed'];
const CHANNEL_INDEX = new Map<string, number>(CHANNELS.map((c, i) => [c, i]));
const STATE_INDEX = new Map<string, number>(ATTEMPT_STATES.map((s, i) => [s, i]));

/** Plain numbers the hot paths add to; `collect` turns them into counters. */
const hot = {
  recipientsAccepted: new Map<string, number>(),
  attemptResults: new Float64Array(CHANNELS.length * ATTEMPT_STATES.length),
  reportsApplied: 0,
  statusBatches: 0,
  dispatchBatches: 0,
  dispatchBatchJobs: 0,
  verificationStarts: 0,
  verificationChecks: new Map<string, number>(),
};

/** Recipients of accepted messages, by the API that accepted them (one call, not per recipient). */
export function countAccepted(api: string, recipients: number): void {
  hot.recipientsAccepted.set(api, (hot.recipientsAccepted.get(api) ?? 0) + recipients);
}

/** One attempt state change written as a sentMessage event (per event: two map reads and an add). */
export function countAttemptResult(channel: Channel | string, state: AttemptState | string): void {
  const c = CHANNEL_INDEX.get(channel);
  const s = STATE_INDEX.get(state);
  if (c !== undefined && s !== undefined) hot.attemptResults[c * ATTEMPT_STATES.length + s]! += 1;
}

/** Carrier reports (submit responses, receipts, ttl expiries) applied in one committed status batch. */
export function countReportsApplied(reports: number): void {
  hot.reportsApplied += reports;
  hot.statusBatches += 1;
}

/** Dispatch jobs run together as one batch (engine/dispatch-batches.ts). */
export function countDispatchBatch(jobs: number): void {
  hot.dispatchBatches += 1;
  hot.dispatchBatchJobs += jobs;
}

export function countVerificationStart(): void {
  hot.verificationStarts += 1;
}

/** A verify call's outcome: `verified`, `invalid_code`, `expired`, `too_many_attempts`. */
export function countVerificationCheck(outcome: string): void {
  hot.verificationChecks.set(outcome, (hot.verificationChecks.get(outcome) ?? 0) + 1);
}

/** SMPP carriers time one submit in this many (a clock read per PDU would be per recipient). */
export const SUBMIT_SAMPLE_EVERY = 16;

export interface WindowReading {
  size: number;
  inUse: number;
}

const windows = new Map<string, { kind: string; connection: string; read: () => WindowReading }>();
let windowId = 0;

/** A carrier connection's submit window, read on scrape; returns the function that stops tracking it. */
export function trackCarrierWindow(kind: string, connection: string, read: () => WindowReading): () => void {
  const id = `${kind}\u0000${connection}\u0000${windowId++}`;
  windows.set(id, { kind, connection, read });
  return () => {
    windows.delete(id);
  };
}

export interface TurnsReading {
  size: number;
  inUse: number;
  waitingBytes: number;
}

const turnSources = new Set<() => TurnsReading>();

/** The API process's large-call turns (shared/sending/large-call-turns.ts), read on scrape; returns the remover. */
export function trackLargeCallTurns(read: () => TurnsReading): () => void {
  turnSources.add(read);
  return () => {
    turnSources.delete(read);
  };
}

export interface QueueReading {
  queue: string;
  /** The channel family, `status` or `webhooks`. */
  family: string;
  /** The dispatch lane, or '' for queues without lanes. */
  lane: string;
  counts: Record<string, number>;
  /** Seconds the oldest waiting job has waited since it fell due; 0 when none waits. */
  oldestWaitingSeconds: number;
}

const queueSources = new Set<() => Promise<QueueReading[]>>();

/** Where scrapes read queue depths from (the web process: one reading per deployment); returns the remover. */
export function addQueueSource(read: () => Promise<QueueReading[]>): () => void {
  queueSources.add(read);
  return () => {
    queueSources.delete(read);
  };
}

let lastReading: { at: number; readings: Promise<QueueReading[]> } | null = null;

/** One read of the queues per scrape (both queue families collect at once and share it). */
function queueReadings(): Promise<QueueReading[]> {
  const now = Date.now();
  if (!lastReading || now - lastReading.at > 500) {
    lastReading = { at: now, readings: Promise.all([...queueSources].map((read) => read().catch(() => [] as QueueReading[]))).then((r) => r.flat()) };
  }
  return lastReading.readings;
}

function counterFrom(registry: Registry, name: string, help: string, labelNames: string[], read: (set: (labels: Record<string, string>, value: number) => void) => void): void {
  // A counter whose value is whatever the plain numbers say at scrape time.
  const counter: Counter = new Counter({
    name, help, labelNames, registers: [registry],
    collect() {
      counter.reset();
      read((labels, value) => counter.inc(labels, value));
    },
  });
}

interface Families {
  registry: Registry;
  httpRequests: Counter;
  httpDuration: Histogram;
  submitSeconds: Histogram;
  webhookDeliveries: Counter;
  webhookSeconds: Histogram;
  webhookDead: Counter;
}

let families: Families | null = null;

/** The process's registry with every family (made once). */
export function metricsRegistry(): Registry {
  return familiesOf().registry;
}

function familiesOf(): Families {
  if (families) return families;
  const registry = new Registry();
  // Node's own metrics. The event-loop delay is sampled every 100 ms, not prom-client's default 10:
  // at 10 every process of the service wakes ~90 times a second even when idle (~2.4 ms of CPU a
  // second each, and as many context switches on cores the send path needs); delays that matter
  // (tens of ms and more) still show at 100.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  const httpRequests = new Counter({
    name: 'switchboard_http_requests_total', help: 'HTTP requests answered, by method, route (the route pattern) and status',
    labelNames: ['method', 'route', 'status'], registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'switchboard_http_request_duration_seconds', help: 'Time from a request\'s arrival to its answer, by method and route',
    labelNames: ['method', 'route'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry],
  });
  counterFrom(registry, 'switchboard_recipients_accepted_total', 'Recipients of accepted messages, by API (v2, v1, simple, xml, verify)', ['api'], (set) => {
    for (const [api, n] of hot.recipientsAccepted) set({ api }, n);
  });
  counterFrom(registry, 'switchboard_attempts_total', 'Attempt state changes written as sentMessage events, by channel and result', ['channel', 'result'], (set) => {
    for (let c = 0; c < CHANNELS.length; c++) {
      for (let s = 0; s < ATTEMPT_STATES.length; s++) {
        const n = hot.attemptResults[c * ATTEMPT_STATES.length + s]!;
        if (n > 0) set({ channel: CHANNELS[c]!, result: ATTEMPT_STATES[s]! }, n);
      }
    }
  });
  counterFrom(registry, 'switchboard_carrier_reports_applied_total', 'Carrier reports (submit responses, receipts, ttl expiries) applied in committed status batches', [], (set) => {
    set({}, hot.reportsApplied);
  });
  counterFrom(registry, 'switchboard_status_batches_total', 'Status batches committed', [], (set) => {
    set({}, hot.statusBatches);
  });
  counterFrom(registry, 'switchboard_dispatch_batches_total', 'Dispatch batches started (the jobs of a lane run together, one transaction each)', [], (set) => {
    set({}, hot.dispatchBatches);
  });
  counterFrom(registry, 'switchboard_dispatch_batch_jobs_total', 'Dispatch jobs run in those batches (divided by the batches: jobs per batch)', [], (set) => {
    set({}, hot.dispatchBatchJobs);
  });
  counterFrom(registry, 'switchboard_verifications_started_total', 'Verification sessions started (a code sent)', [], (set) => {
    set({}, hot.verificationStarts);
  });
  counterFrom(registry, 'switchboard_verification_checks_total', 'Verify calls by outcome (verified, invalid_code, expired, too_many_attempts)', ['outcome'], (set) => {
    for (const [outcome, n] of hot.verificationChecks) set({ outcome }, n);
  });
  const submitSeconds = new Histogram({
    name: 'switchboard_carrier_submit_seconds', help: `Carrier submit latency (SMPP: submit_sm to its response; HTTP carriers: the send request; one submit in ${SUBMIT_SAMPLE_EVERY} is timed), by kind and connection`,
    labelNames: ['kind', 'connection'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry],
  });
  const windowGauge: Gauge = new Gauge({
    name: 'switchboard_carrier_window', help: 'Carrier submit windows: size and in use (unanswered submits), by kind and connection',
    labelNames: ['kind', 'connection', 'measure'], registers: [registry],
    collect() {
      windowGauge.reset();
      for (const w of windows.values()) {
        const { size, inUse } = w.read();
        windowGauge.inc({ kind: w.kind, connection: w.connection, measure: 'size' }, size);
        windowGauge.inc({ kind: w.kind, connection: w.connection, measure: 'in_use' }, inUse);
      }
    },
  });
  const turnsGauge: Gauge = new Gauge({
    name: 'switchboard_accept_large_call_turns',
    help: 'Turns of large send calls in this API process: size (narrow while small calls come, wide after a quiet minute), in_use, and waiting_bytes (bodies waiting for a turn)',
    labelNames: ['measure'], registers: [registry],
    collect() {
      turnsGauge.reset();
      for (const read of turnSources) {
        const { size, inUse, waitingBytes } = read();
        turnsGauge.inc({ measure: 'size' }, size);
        turnsGauge.inc({ measure: 'in_use' }, inUse);
        turnsGauge.inc({ measure: 'waiting_bytes' }, waitingBytes);
      }
    },
  });
  const webhookDeliveries = new Counter({
    name: 'switchboard_webhook_deliveries_total', help: 'Webhook POSTs by outcome (delivered, http_error, network_error, refused)',
    labelNames: ['outcome'], registers: [registry],
  });
  const webhookSeconds = new Histogram({
    name: 'switchboard_webhook_delivery_seconds', help: 'Webhook POST duration by outcome',
    labelNames: ['outcome'], buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15], registers: [registry],
  });
  const webhookDead = new Counter({
    name: 'switchboard_webhook_batches_dead_total', help: 'Webhook batches dead-lettered after their last attempt', registers: [registry],
  });
  const queueJobs: Gauge = new Gauge({
    name: 'switchboard_queue_jobs', help: 'Jobs per queue (read from Redis on scrape by the web process), by queue, family, lane and state',
    labelNames: ['queue', 'family', 'lane', 'state'], registers: [registry],
    async collect() {
      const readings = await queueReadings();
      queueJobs.reset();
      for (const r of readings) {
        for (const [state, n] of Object.entries(r.counts)) queueJobs.set({ queue: r.queue, family: r.family, lane: r.lane, state }, n);
      }
    },
  });
  const queueOldest: Gauge = new Gauge({
    name: 'switchboard_queue_oldest_waiting_seconds', help: 'How long the oldest waiting job of a queue has waited since it fell due',
    labelNames: ['queue', 'family', 'lane'], registers: [registry],
    async collect() {
      const readings = await queueReadings();
      queueOldest.reset();
      for (const r of readings) queueOldest.set({ queue: r.queue, family: r.family, lane: r.lane }, r.oldestWaitingSeconds);
    },
  });
  families = { registry, httpRequests, httpDuration, submitSeconds, webhookDeliveries, webhookSeconds, webhookDead };
  return families;
}

/**
 * The HTTP families' series per (method, route, status), made once: a request then costs two plain
 * increments instead of two label hashings (a bounded set: routes are patterns, not paths).
 */
const httpSeries = new Map<string, { requests: ReturnType<Counter['labels']>; duration: ReturnType<Histogram['labels']> }>();

/** One answered HTTP request (per request, not per recipient). */
export function observeHttpRequest(method: string, route: string, status: number, seconds: number): void {
  const series = getOrMake(httpSeries, `${method} ${status} ${route}`, () => {
    const f = familiesOf();
    return { requests: f.httpRequests.labels(method, route, String(status)), duration: f.httpDuration.labels(method, route) };
  });
  series.requests.inc();
  series.duration.observe(seconds);
}

/** The submit histogram's series per (kind, connection), made once (as the HTTP series above). */
const submitSeries = new Map<string, ReturnType<Histogram['labels']>>();

/** A timed carrier submit (the caller samples). */
export function observeSubmit(kind: string, connection: string, seconds: number): void {
  getOrMake(submitSeries, `${kind}\u0000${connection}`, () => familiesOf().submitSeconds.labels(kind, connection)).observe(seconds);
}

export type WebhookOutcome = 'delivered' | 'http_error' | 'network_error' | 'refused';

export function observeWebhookDelivery(outcome: WebhookOutcome, seconds: number): void {
  const f = familiesOf();
  f.webhookDeliveries.inc({ outcome });
  f.webhookSeconds.observe({ outcome }, seconds);
}

export function countDeadLettered(batches = 1): void {
  familiesOf().webhookDead.inc(batches);
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * A scrape of `/metrics`: the exposition text, or 401 when METRICS_TOKEN is set and the request
 * does not carry it as `Authorization: Bearer` (the scheme in any case; compared in constant time).
 */
export async function scrape(authorization: string | undefined, token: string | null): Promise<{ status: number; contentType: string; body: string }> {
  if (token !== null) {
    const presented = presentedCredential(authorization, { basic: false });
    if (!presented || !timingSafeEqual(digest(presented), digest(token))) {
      return { status: 401, contentType: 'text/plain; charset=utf-8', body: 'metrics need Authorization: Bearer <METRICS_TOKEN>\n' };
    }
  }
  const registry = metricsRegistry();
  return { status: 200, contentType: registry.contentType, body: await registry.metrics() };
}
