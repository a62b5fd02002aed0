/**
 * The WhatsApp connector's small rules, as pure functions (table-tested): our reference in
 * `biz_opaque_callback_data`, how long to wait before trying a throttled send again, and how long
 * a throttling answer pauses the business number for every process.
 */

/** Our per-attempt reference sent in `biz_opaque_callback_data` (Meta echoes it in status webhooks). */
export function ourRefOf(attemptId: number): string {
  return `a${attemptId}`;
}

/** The attempt id of a `biz_opaque_callback_data` we sent, or undefined for anything else. */
export function attemptIdOfRef(ref: string | undefined): number | undefined {
  if (ref === undefined) return undefined;
  const m = /^a([1-9]\d{0,15})$/.exec(ref);
  if (!m) return undefined;
  const id = Number(m[1]);
  return Number.isSafeInteger(id) ? id : undefined;
}

/** Meta's spam rate limit (quality-based): backs off much longer than the others. */
const SPAM_LIMIT = 131048;
const FIRST_RETRY_MS = 1_000;
const FIRST_SPAM_RETRY_MS = 10_000;
const MAX_RETRY_MS = 60_000;

/**
 * Milliseconds before try `tries + 1` of a send refused as retryable after `tries` tries: what
 * Meta asked for when it said, else doubling from 1 s (10 s after a spam limit) up to 60 s, with
 * ±20 % jitter so that the attempts of one throttled burst do not come back together.
 */
export function retryDelayMs(tries: number, code: number, afterMs?: number, random: () => number = Math.random): number {
  if (afterMs !== undefined && afterMs > 0) return afterMs;
  const first = code === SPAM_LIMIT ? FIRST_SPAM_RETRY_MS : FIRST_RETRY_MS;
  const base = Math.min(MAX_RETRY_MS, first * 2 ** Math.max(0, tries - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

/**
 * How long a throttling answer stops every process from sending over that business number: the
 * per-number limit (130429) and the pair limit (131056) a second, the spam limit ten; 0 for codes
 * that say nothing about the number's pace.
 */
export function throttlePauseMs(code: number): number {
  switch (code) {
    case 130429:
    case 131056:
      return 1_000;
    case SPAM_LIMIT:
      return 10_000;
    default:
      return 0;
  }
}

/** Template refusals after which the cached template list of the WABA is read again. */
export const TEMPLATE_CODES: ReadonlySet<number> = new Set([132000, 132001, 132005, 132007, 132012, 132015, 132016]);
