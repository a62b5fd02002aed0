/**
 * Every connector kind, by name. Adding a connector is its folder under shared/carriers/ and one
 * entry here: the admin API, the callback route and the dispatch pools find it through this map.
 * The sandbox (D10) is not a stored kind: it is the registry's explicit default route while it is on.
 */
import type { Family } from '../channels/index.js';
import type { CarrierProvider } from './provider.js';
import { smppProvider } from './smpp/provider.js';

const ALL: CarrierProvider[] = [smppProvider as unknown as CarrierProvider];

export const PROVIDERS: ReadonlyMap<string, CarrierProvider> = new Map(ALL.map((p) => [p.kind, p]));

/** The kinds whose connections carry a family's channels. */
export function kindsOfFamily(family: Family): string[] {
  return ALL.filter((p) => p.family === family).map((p) => p.kind);
}

/** Families whose steps are routed by the account's sender rows (D12), not by destination prefix. */
export const SENDER_ROUTED_FAMILIES: ReadonlySet<Family> = new Set(ALL.filter((p) => p.routing === 'sender').map((p) => p.family));
