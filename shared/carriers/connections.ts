/**
 * The carrier connections a process runs, for every connector kind, and the routes they contribute.
 *
 * A process that dispatches a family (its pool) runs the enabled connections of the kinds that
 * carry it: stored ones (admin API) and those the environment defines (SMPP_URL). It re-reads them
 * every `refreshMs`, at once when the admin API changed them in this process, and before a dispatch
 * batch that read a newer stored version than its routes reflect (`CarrierRegistry.catchUp`,
 * migration 027: a change applies to everything accepted after the admin API answered); a connection whose
 * fingerprint changed is replaced (the old one closes gracefully after the new routes are in
 * place), a removed one is closed. Each kind's routes replace only that kind's in the registry.
 *
 * Each process also publishes its connections' states to Redis (`<prefix>:carriers:state`, a
 * hash field per connection and process, refreshed with the routes), which `GET
 * /admin/api/carriers` reads in any process.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from '../redis.js';
import type { SecretBox } from '../secrets/sealed.js';
import type { CarrierRegistry, PrefixRoute, SenderRoute } from '../engine/routing.js';
import type { CarrierProvider, ConnectionSpec, ConnectionState, OpenConnection, ProviderContext, SenderSpec } from './provider.js';
import { carrierConfigChanges, loadConnections, loadSenders } from './store.js';
import { readRoutingConfigVersion } from '../domain/routing-config.js';

interface Running {
  kind: string;
  fingerprint: string;
  spec: ConnectionSpec;
  open: OpenConnection;
}

export interface ConnectionManagerDeps {
  providers: readonly CarrierProvider[];
  context: ProviderContext;
  box: SecretBox;
  registry: CarrierRegistry;
  /** Re-read the stored connections this often; default 5000 ms. */
  refreshMs?: number;
}

/** How often a process publishes its connections' states, and how long a published state counts. */
const STATE_PUBLISH_MS = 2_000;
const STATE_TTL_MS = 15_000;
const STATE_RANK: Record<ConnectionState['state'], number> = { bound: 4, ready: 4, connecting: 2, error: 1, disabled: 0 };

export function statesKey(redisPrefix: string): string {
  return `${redisPrefix}:carriers:state`;
}

export class ConnectionManager {
  private readonly running = new Map<string, Running>();
  private readonly closing = new Set<Promise<void>>();
  private readonly processId = randomBytes(6).toString('hex');
  private timer: NodeJS.Timeout | null = null;
  private stateTimer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;
  private again = false;
  private closed = false;
  /** The stored routing configuration's version the routes reflect (migration 027). */
  private appliedVersion = 0;
  private readonly onChanged = (): void => {
    void this.refresh().catch((err: unknown) => this.deps.context.logger.error({ err: (err as Error).message }, 'carrier connections refresh failed'));
  };

  constructor(private readonly deps: ConnectionManagerDeps) {}

  /** Loads the connections, starts them and registers their routes; then refreshes periodically. */
  async start(): Promise<void> {
    await this.refresh();
    this.deps.registry.followStoredConfig({ version: () => this.appliedVersion, catchUp: (version) => this.catchUp(version) });
    carrierConfigChanges.on('changed', this.onChanged);
    this.timer = setInterval(this.onChanged, this.deps.refreshMs ?? 5_000);
    this.timer.unref();
    // States change between refreshes (a bind completes, a link drops): published more often.
    this.stateTimer = setInterval(() => {
      void this.publishStates().catch(() => undefined);
    }, STATE_PUBLISH_MS);
    this.stateTimer.unref();
  }

  /** The running connection of a name (tests, operations). */
  connection(name: string): OpenConnection | null {
    return this.running.get(name)?.open ?? null;
  }

  /**
   * For a dispatch batch that read stored version `version`: joins the refresh under way or starts
   * one, until the routes reflect that version. Two rounds at most: a refresh already under way
   * may have read the configuration before `version` was written; one started after it cannot.
   * A failed refresh is logged and the batch goes on with the routes there are (as after a failed
   * periodic refresh).
   */
  private async catchUp(version: number): Promise<void> {
    if (this.appliedVersion < version && !this.closed) {
      this.deps.context.logger.info({ from: this.appliedVersion, to: version }, 'carrier connections re-read for a newer stored configuration');
    }
    for (let round = 0; round < 2 && this.appliedVersion < version && !this.closed; round++) {
      try {
        await (this.refreshing ?? this.refresh());
      } catch (err) {
        this.deps.context.logger.error({ err: (err as Error).message, version },
          'carrier connections not re-read for a newer stored configuration; dispatching with the routes there are');
        return;
      }
    }
  }

  /** Applies the current configuration (serialised: a call during a refresh runs once more after it). */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      try {
        do {
          this.again = false;
          await this.apply();
        } while (this.again && !this.closed);
      } finally {
        this.refreshing = null;
      }
    })();
    return this.refreshing;
  }

  private async wanted(provider: CarrierProvider, stored: ConnectionSpec[]): Promise<ConnectionSpec[]> {
    const env = provider.envConnections?.(this.deps.context.config) ?? [];
    const envNames = new Set(env.map((c) => c.name));
    const out: ConnectionSpec[] = [];
    // Stored connections first: on an equal prefix their routes win over the environment's.
    for (const spec of stored) {
      if (spec.kind !== provider.kind || !spec.enabled || envNames.has(spec.name)) continue;
      const problem = provider.check?.(spec) ?? null;
      if (problem) {
        this.deps.context.logger.error({ connection: spec.name, problem }, 'stored carrier connection is invalid; skipped');
        continue;
      }
      out.push(spec);
    }
    return [...out, ...env];
  }

  private async apply(): Promise<void> {
    if (this.closed) return;
    const { providers, box, registry, context } = this.deps;
    const byKind = new Map(providers.map((p) => [p.kind, p]));
    // Read before the rows: routes built from rows at least this new never claim a later version.
    const version = await readRoutingConfigVersion(context.db);
    const stored = await loadConnections(context.db, box, byKind, [...byKind.keys()]);
    const senderFamilies = providers.filter((p) => p.routing === 'sender').map((p) => p.family);
    const senders = senderFamilies.length > 0 ? await loadSenders(context.db, box, { families: senderFamilies }) : [];
    if (this.closed) return;
    const retired: Running[] = [];
    const wantedByKind = new Map<string, ConnectionSpec[]>();
    for (const provider of providers) {
      const wanted = await this.wanted(provider, stored);
      wantedByKind.set(provider.kind, wanted);
      const names = new Set(wanted.map((w) => w.name));
      for (const [name, run] of this.running) {
        if (run.kind === provider.kind && !names.has(name)) {
          this.running.delete(name);
          retired.push(run);
        }
      }
      for (const spec of wanted) {
        const fingerprint = provider.fingerprint(spec, wanted);
        const run = this.running.get(spec.name);
        if (run && run.fingerprint === fingerprint && run.kind === provider.kind) {
          run.spec = spec; // routes may have changed; the connection itself did not
          continue;
        }
        if (run) {
          this.running.delete(spec.name);
          retired.push(run);
        }
        this.running.set(spec.name, { kind: provider.kind, fingerprint, spec, open: provider.open(spec, wanted, context) });
      }
    }
    for (const provider of providers) {
      const wanted = wantedByKind.get(provider.kind) ?? [];
      if (provider.routing === 'prefix') {
        registry.setPrefixRoutes(provider.kind, this.prefixRoutes(provider, wanted));
      } else {
        registry.setSenderRoutes(provider.kind, this.senderRoutes(provider, wanted, senders));
      }
    }
    this.appliedVersion = Math.max(this.appliedVersion, version);
    // Only after the new routes are in place: nothing new is handed to a retired connection.
    for (const run of retired) {
      context.logger.info({ connection: run.spec.name, kind: run.kind }, 'carrier connection retired');
      this.track(run.open.close());
    }
    // Not awaited: a dispatch batch catching up waits for the routes, not for Redis.
    void this.publishStates().catch((err: unknown) =>
      context.logger.warn({ err: (err as Error).message }, 'carrier connection states not published'));
  }

  private prefixRoutes(provider: CarrierProvider, wanted: ConnectionSpec[]): PrefixRoute[] {
    const routes: PrefixRoute[] = [];
    for (const spec of wanted) {
      const run = this.running.get(spec.name);
      if (!run || !run.open.sends) continue;
      // D12: an empty list means every destination.
      for (const prefix of spec.routes.length > 0 ? spec.routes : ['']) {
        for (const channel of provider.channels) routes.push({ channel, prefix, carrier: run.open.carrier });
      }
    }
    return routes;
  }

  private senderRoutes(provider: CarrierProvider, wanted: ConnectionSpec[], senders: SenderSpec[]): SenderRoute[] {
    const routes: SenderRoute[] = [];
    for (const spec of wanted) {
      const run = this.running.get(spec.name);
      if (!run) continue;
      const mine = senders.filter((s) => s.connection === spec.name && s.family === provider.family);
      run.open.setSenders?.(mine);
      if (!run.open.sends) continue;
      const prefixes = spec.routes.length > 0 ? spec.routes : [''];
      for (const s of mine) routes.push({ family: s.family, accountId: s.accountId, sender: s.sender, prefixes, carrier: run.open.carrier });
    }
    return routes;
  }

  /** Publishes this process's view of its connections (read by `readConnectionStates`). */
  private async publishStates(): Promise<void> {
    const { redis, config } = this.deps.context;
    const fields: string[] = [];
    const now = Date.now();
    for (const [name, run] of this.running) {
      fields.push(`${name}\u0000${this.processId}`, JSON.stringify({ ...run.open.state(), at: now }));
    }
    if (fields.length > 0) await redis.hset(statesKey(config.redisPrefix), ...fields);
  }

  private track(p: Promise<void>): void {
    const tracked = p.catch((err: unknown) => this.deps.context.logger.warn({ err: (err as Error).message }, 'carrier connection close failed'));
    this.closing.add(tracked);
    void tracked.finally(() => this.closing.delete(tracked));
  }

  /** Stops refreshing, closes every connection (in-flight sends answered first) and drops the routes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.stateTimer) clearInterval(this.stateTimer);
    this.timer = null;
    this.stateTimer = null;
    carrierConfigChanges.off('changed', this.onChanged);
    this.deps.registry.followStoredConfig(null);
    await this.refreshing?.catch(() => undefined);
    for (const provider of this.deps.providers) {
      if (provider.routing === 'prefix') this.deps.registry.setPrefixRoutes(provider.kind, []);
      else this.deps.registry.setSenderRoutes(provider.kind, []);
    }
    const fields = [...this.running.keys()].map((name) => `${name}\u0000${this.processId}`);
    for (const run of this.running.values()) this.track(run.open.close());
    this.running.clear();
    await Promise.all([...this.closing]);
    if (fields.length > 0) await this.deps.context.redis.hdel(statesKey(this.deps.context.config.redisPrefix), ...fields).catch(() => undefined);
  }
}

/**
 * Each connection's live state across the deployment: the best state any process reported within
 * the last few refreshes (a connection is bound when one process is), with the latest error in
 * words. A connection no process runs has no entry. Stale entries are removed.
 */
export async function readConnectionStates(redis: Redis, redisPrefix: string, now = Date.now()): Promise<Map<string, ConnectionState>> {
  const all = await redis.hgetall(statesKey(redisPrefix));
  const out = new Map<string, ConnectionState & { at: number }>();
  const stale: string[] = [];
  for (const [field, value] of Object.entries(all)) {
    const name = field.split('\u0000')[0]!;
    let entry: ConnectionState & { at: number };
    try {
      entry = JSON.parse(value) as ConnectionState & { at: number };
    } catch {
      stale.push(field);
      continue;
    }
    if (now - entry.at > STATE_TTL_MS) {
      stale.push(field);
      continue;
    }
    const best = out.get(name);
    if (!best || STATE_RANK[entry.state] > STATE_RANK[best.state]) {
      out.set(name, { ...entry, ...(entry.detail === undefined && best?.detail !== undefined && { detail: best.detail }) });
    }
  }
  if (stale.length > 0) await redis.hdel(statesKey(redisPrefix), ...stale).catch(() => undefined);
  return new Map([...out].map(([name, { at: _at, ...state }]) => [name, state]));
}
