/**
 * Which carrier takes an attempt: the route table, as data. Each connector kind contributes its own
 * routes (replacing only its own), and the sandbox, while it is on, is the explicit default route.
 *
 * - Sender-routed families (D12: WhatsApp, Viber): the step goes through the connection of the
 *   account's sender row that the step names, when that connection's prefixes cover the number.
 * - Prefix-routed channels (SMS): the connection whose destination prefix is the longest match; on
 *   an equal prefix the route contributed first wins (stored routes before SMPP_URL's).
 * - Otherwise the default route (the sandbox), else none: `[303]`, and the flow moves on (D3).
 */
import { familyOf, type Channel, type Family } from '../channels/index.js';
import type { Carrier } from '../carriers/types.js';

export interface PrefixRoute {
  channel: Channel;
  prefix: string;
  carrier: Carrier;
}

export interface SenderRoute {
  family: Family;
  accountId: number;
  sender: string;
  /** Destination prefixes the connection covers ('' = every destination). */
  prefixes: string[];
  carrier: Carrier;
}

/** The carrier for an attempt, or why there is none (its `result_info`). */
export type RouteChoice = { carrier: Carrier; info?: undefined } | { carrier: null; info: string };

/** Who keeps a registry's routes at the stored configuration (the process's ConnectionManager). */
export interface StoredConfigFollower {
  /** The stored configuration version the routes reflect. */
  version(): number;
  /**
   * Re-reads the stored configuration and applies it (its version read before its rows) unless a
   * re-read already brought the routes to `version`. Never rejects.
   */
  catchUp(version: number): Promise<void>;
}

const senderKey = (accountId: number, family: Family, sender: string): string => `${accountId}\u0000${family}\u0000${sender}`;

export class CarrierRegistry {
  private readonly prefixBySource = new Map<string, PrefixRoute[]>();
  private readonly senderBySource = new Map<string, SenderRoute[]>();
  private prefixRoutes: PrefixRoute[] = [];
  private senderRoutes = new Map<string, SenderRoute>();
  private defaultRoute: Carrier | null = null;
  private follower: StoredConfigFollower | null = null;

  /** `senderRouted`: families whose steps only go where a sender row sends them (D12). */
  constructor(private readonly senderRouted: ReadonlySet<Family> = new Set()) {}

  /**
   * Lets the process's connection manager keep these routes at the stored configuration's version
   * (null: none does any more).
   */
  followStoredConfig(follower: StoredConfigFollower | null): void {
    this.follower = follower;
  }

  /**
   * Re-reads the routes when they are older than the stored configuration's `version` (read by the
   * caller: domain/routing-config.ts) and resolves once that is done. A re-read that fails leaves
   * the routes as they were (the follower logs it); a registry that no connection manager follows
   * has nothing to re-read.
   */
  async catchUp(version: number): Promise<void> {
    const follower = this.follower;
    if (follower && follower.version() < version) await follower.catchUp(version);
  }

  /** The carrier for everything no route claims (the sandbox while it is on), or none. */
  setDefault(carrier: Carrier | null): void {
    this.defaultRoute = carrier;
  }

  /** Replaces the prefix routes one source (a connector kind) contributes. */
  setPrefixRoutes(source: string, routes: PrefixRoute[]): void {
    this.prefixBySource.set(source, routes);
    // A stable sort: among equal prefixes, routes keep the order their sources listed them in.
    this.prefixRoutes = [...this.prefixBySource.values()].flat().sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** Replaces the sender routes one source (a connector kind) contributes. */
  setSenderRoutes(source: string, routes: SenderRoute[]): void {
    this.senderBySource.set(source, routes);
    const byKey = new Map<string, SenderRoute>();
    for (const list of this.senderBySource.values()) {
      for (const r of list) byKey.set(senderKey(r.accountId, r.family, r.sender), r);
    }
    this.senderRoutes = byKey;
  }

  /** The carrier of one attempt (see the header for the order of the rules). */
  route(channel: Channel, phone: string, accountId: number, sender: string): RouteChoice {
    const family = familyOf(channel);
    if (this.senderRouted.has(family)) {
      const r = this.senderRoutes.get(senderKey(accountId, family, sender));
      if (r) {
        return r.prefixes.some((p) => phone.startsWith(p))
          ? { carrier: r.carrier }
          : { carrier: null, info: `[303] No route: sender "${sender}" does not cover this destination` };
      }
      if (this.defaultRoute) return { carrier: this.defaultRoute };
      return { carrier: null, info: `[303] No route: sender "${sender}" is not registered for ${family}` };
    }
    const carrier = this.pick(channel, phone);
    return carrier ? { carrier } : { carrier: null, info: '[303] No route' };
  }

  /** The prefix route of a number on a channel, else the default route. */
  pick(channel: Channel, phone: string): Carrier | null {
    for (const route of this.prefixRoutes) {
      if (route.channel === channel && phone.startsWith(route.prefix)) {
        return route.carrier;
      }
    }
    return this.defaultRoute;
  }

  byName(name: string): Carrier | null {
    return this.carriers().find((c) => c.name === name) ?? null;
  }

  carriers(): Carrier[] {
    const all = new Set<Carrier>(this.prefixRoutes.map((r) => r.carrier));
    for (const r of this.senderRoutes.values()) all.add(r.carrier);
    if (this.defaultRoute) {
      all.add(this.defaultRoute);
    }
    return [...all];
  }
}
