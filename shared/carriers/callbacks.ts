/**
 * The one inbound path for HTTP carriers' callbacks (D12): `GET|POST /callbacks/<kind>/<connection>`.
 * The connection's provider authenticates the request on its raw bytes and reads it; what it
 * reports is applied through the engine's common paths (status reports, inbound messages) before
 * the carrier is answered, so an answered callback is durable and a failed one is sent again.
 */
import type { CarrierSink } from './types.js';
import type { CallbackRequest } from './http-carrier.js';
import type { CallbackOutcome, ConnectionSpec, ProviderContext } from './provider.js';
import type { SecretBox } from '../secrets/sealed.js';
import { PROVIDERS } from './providers.js';
import { carrierConfigChanges, loadConnections } from './store.js';

export interface CallbackDeps extends ProviderContext {
  box: SecretBox;
  sink: CarrierSink;
}

const NOT_FOUND: CallbackOutcome = { status: 404, body: '{"message":"Not found"}', contentType: 'application/json', reports: [], inbound: [] };

/** Stored connections by name, kept for a moment: a burst of callbacks reads each once. */
class SpecCache {
  private readonly entries = new Map<string, { at: number; spec: ConnectionSpec | null }>();
  constructor(private readonly ttlMs = 2_000) {
    carrierConfigChanges.on('changed', () => this.entries.clear());
  }

  async get(deps: CallbackDeps, name: string, now = Date.now()): Promise<ConnectionSpec | null> {
    const hit = this.entries.get(name);
    if (hit && now - hit.at < this.ttlMs) return hit.spec;
    const specs = await loadConnections(deps.db, deps.box, PROVIDERS, null, name);
    const spec = specs[0] ?? null;
    if (this.entries.size > 1000) this.entries.clear();
    this.entries.set(name, { at: now, spec });
    return spec;
  }
}

const specs = new SpecCache();

export async function handleCarrierCallback(deps: CallbackDeps, kind: string, name: string, req: CallbackRequest): Promise<CallbackOutcome> {
  const provider = PROVIDERS.get(kind);
  if (!provider?.callback) return NOT_FOUND;
  const spec = await specs.get(deps, name);
  if (!spec || spec.kind !== kind || !spec.enabled) return NOT_FOUND;
  const outcome = await provider.callback(spec, req, deps);
  if (outcome.reports.length > 0) await deps.sink.report(outcome.reports);
  for (const message of outcome.inbound) await deps.sink.inbound(message);
  return outcome;
}
