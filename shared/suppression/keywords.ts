/**
 * Opt-out keywords (issue 27), as pure functions. An inbound message opts its sender out when its
 * whole text is an opt-out keyword, and back in when it is an opt-in keyword. Texts are compared
 * without case, diacritics, surrounding punctuation or repeated spaces: `Stop!`, ` stop `,
 * `Odhlásit` and `STOP  sms` all match. Accounts may replace either list (null: the defaults).
 */

/** The defaults: the usual English words, and the Czech ODHLÁSIT / STOP SMS. */
export const DEFAULT_OPT_OUT_KEYWORDS: readonly string[] = ['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'ODHLASIT', 'STOP SMS'];
export const DEFAULT_OPT_IN_KEYWORDS: readonly string[] = ['START', 'UNSTOP'];

/** Longest keyword (after normalising): longer texts are never keywords, and are not even looked at. */
export const MAX_KEYWORD_LENGTH = 64;

const MARKS = /\p{M}+/gu;
const SPACES = /[\p{Z}\s]+/gu;
const EDGES = /^[\p{P}\p{S}\p{Z}\s]+|[\p{P}\p{S}\p{Z}\s]+$/gu;

/** The form keywords and texts are compared in: no diacritics, upper case, single spaces, no punctuation at either end. */
export function normalizeKeyword(text: string): string {
  return text.normalize('NFKD').replace(MARKS, '').toUpperCase().replace(EDGES, '').replace(SPACES, ' ');
}

export type KeywordKind = 'opt-out' | 'opt-in';

export interface KeywordLists {
  /** The account's opt-out keywords, or null for the defaults. */
  optOut: readonly string[] | null;
  /** The account's opt-in keywords, or null for the defaults. */
  optIn: readonly string[] | null;
}

/** Whether a text (the whole inbound message) is a keyword; opt-out wins when a word is on both lists. */
export function classifyKeyword(text: string, lists: KeywordLists = { optOut: null, optIn: null }): KeywordKind | null {
  if (text.length > MAX_KEYWORD_LENGTH * 4) {
    return null; // far too long to be a keyword, whatever normalising would remove
  }
  const normalized = normalizeKeyword(text);
  if (normalized.length === 0 || normalized.length > MAX_KEYWORD_LENGTH) {
    return null;
  }
  if (matches(normalized, lists.optOut ?? DEFAULT_OPT_OUT_KEYWORDS)) {
    return 'opt-out';
  }
  return matches(normalized, lists.optIn ?? DEFAULT_OPT_IN_KEYWORDS) ? 'opt-in' : null;
}

/** Whether a text could be a keyword of some list (worth reading the account's lists for). */
export function mayBeKeyword(text: string): boolean {
  if (text.length > MAX_KEYWORD_LENGTH * 4) {
    return false;
  }
  const length = normalizeKeyword(text).length;
  return length > 0 && length <= MAX_KEYWORD_LENGTH;
}

function matches(normalized: string, keywords: readonly string[]): boolean {
  for (const keyword of keywords) {
    if (normalizeKeyword(keyword) === normalized) {
      return true;
    }
  }
  return false;
}
