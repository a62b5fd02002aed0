/**
 * Which carrier takes an attempt. SMS: the SMPP connection whose destination prefix is the
 * longest match, else the sandbox when it is on. Other channels: the sandbox when it is on (their
 * connectors plug in here). No carrier means `[303] No route`.
 */
import type { Carrier, Channel } from '../carriers/types.js';

export interface Route {
  channel: Channel;
  prefix: string;
  carrier: Carrier;
}

export class CarrierRegistry {
  private routes: Route[] = [];

  constructor(private fallback: Carrier | null) {}

  /** The carrier for everything no route claims (the sandbox when it is on). */
  setFallback(carrier: Carrier | null): void {
    this.fallback = carrier;
  }

  /** Replace the prefix routes (loaded from Postgres or from SMPP_URL). */
  setRoutes(routes: Route[]): void {
    this.routes = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  pick(channel: Channel, phone: string): Carrier | null {
    for (const route of this.routes) {
      if (route.channel === channel && phone.startsWith(route.prefix)) {
        return route.carrier;
      }
    }
    return this.fallback;
  }

  byName(name: string): Carrier | null {
    if (this.fallback?.name === name) {
      return this.fallback;
    }
    return this.routes.find((r) => r.carrier.name === name)?.carrier ?? null;
  }

  carriers(): Carrier[] {
    const all = new Set<Carrier>(this.routes.map((r) => r.carrier));
    if (this.fallback) {
      all.add(this.fallback);
    }
    return [...all];
  }
}
