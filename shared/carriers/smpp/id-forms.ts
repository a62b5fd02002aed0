/**
 * Learning how an SMSC writes its message ids in receipts, relative to how its submit_sm_resp
 * wrote them (pure functions; the Redis side is in receipt-ids.ts).
 *
 * A submit id is registered under one ref: `normalizeMessageId(id, submitForm)[0]` (with `auto`,
 * the id's own digits: `hex:<lower-case hex or digits, no leading zeros>`, or `str:<lower case>`).
 * A receipt names the same message either the same way (case and leading zeros aside) or, for
 * numeric ids, converted between hex and decimal. Which of these an SMSC does is a fact about the
 * SMSC, the relation:
 *
 * - `same`: the receipt writes the id as the response did (hex/hex, decimal/decimal, opaque strings);
 * - `hex-dec`: hex in the response, decimal in the receipt (`0000001A` → `26`);
 * - `dec-hex`: decimal in the response, hex in the receipt (`26` → `1A`).
 *
 * Under a known relation every receipt id names exactly one ref. Before it is known an all-digit
 * id has up to three readings (`16` may be `hex:16`, `hex:10` or `hex:22`), so a connection learns
 * the relation from its first receipts: a receipt votes when exactly one of its readings is a
 * registered submit id (the others are not), and a relation is taken once it has `minVotes` votes
 * and (nearly) none against it.
 */
import { normalizeMessageId, type MessageIdForm } from './pdu.js';

export type IdRelation = 'same' | 'hex-dec' | 'dec-hex';
export const ID_RELATIONS: readonly IdRelation[] = ['same', 'hex-dec', 'dec-hex'];

const HEX_RE = /^[0-9a-f]+$/i;
const DEC_RE = /^[0-9]+$/;

export function isIdRelation(value: unknown): value is IdRelation {
  return typeof value === 'string' && (ID_RELATIONS as readonly string[]).includes(value);
}

/**
 * The relations a connection's configured forms leave open. Both forms set: none (nothing to
 * learn, every receipt id has one reading). An opaque `string` side: only `same`.
 */
export function openRelations(submitForm: MessageIdForm, receiptForm: MessageIdForm): IdRelation[] {
  if (submitForm !== 'auto' && receiptForm !== 'auto') return [];
  if (submitForm === 'string' || receiptForm === 'string') return ['same'];
  const open: IdRelation[] = ['same'];
  // hex-dec: submit ids in hex, receipts in decimal; dec-hex the other way round.
  if (submitForm !== 'dec' && receiptForm !== 'hex') open.push('hex-dec');
  if (submitForm !== 'hex' && receiptForm !== 'dec') open.push('dec-hex');
  return open;
}

/**
 * The ref an id is registered under when written as the response wrote it: the first key of
 * `normalizeMessageId(id, form)`, without computing the others (for `auto`, the id's own digits
 * and letters, lower case, no leading zeros: `hex:…`; or `str:<lower case>`). '' when empty.
 */
export function sameRef(id: string, form: MessageIdForm): string {
  if (form !== 'auto') return normalizeMessageId(id, form)[0] ?? '';
  const s = id.replace(/\0+$/, '').trim();
  if (s === '') return '';
  return HEX_RE.test(s) ? `hex:${s.toLowerCase().replace(/^0+(?=.)/, '')}` : `str:${s.toLowerCase()}`;
}

/**
 * The ref a receipt id names if the SMSC relates its ids by `relation`, in the key space of the
 * refs registered for `submitForm`; null when the id cannot be written that way (letters in a
 * decimal reading, say).
 */
export function receiptRefUnder(id: string, relation: IdRelation, submitForm: MessageIdForm): string | null {
  const s = id.replace(/\0+$/, '').trim();
  if (s === '') return null;
  switch (relation) {
    case 'same':
      return sameRef(s, submitForm) || null;
    case 'hex-dec':
      // The decimal value, written in hex as the response did: its `auto` ref and its `hex` ref agree.
      return DEC_RE.test(s) ? `hex:${BigInt(s).toString(16)}` : null;
    case 'dec-hex': {
      if (!HEX_RE.test(s)) return null;
      const value = BigInt(`0x${s}`);
      // Written in decimal by the response: as `auto` the digits themselves, as `dec` their value.
      return submitForm === 'dec' ? `hex:${value.toString(16)}` : `hex:${value.toString(10)}`;
    }
  }
}

/** The readings of a receipt id under each open relation (relations that cannot read it are absent). */
export function receiptReadings(id: string, relations: readonly IdRelation[], submitForm: MessageIdForm): Map<IdRelation, string> {
  const readings = new Map<IdRelation, string>();
  for (const relation of relations) {
    const ref = receiptRefUnder(id, relation, submitForm);
    if (ref !== null) readings.set(relation, ref);
  }
  return readings;
}

/** The distinct refs among a receipt's readings. */
export function distinctRefs(readings: ReadonlyMap<IdRelation, string>): string[] {
  return [...new Set(readings.values())];
}

export interface IdVote {
  /** Relations under which the receipt names the one registered ref. */
  for: IdRelation[];
  /** Relations under which it names a ref that is not registered. */
  against: IdRelation[];
}

/**
 * What one receipt says about the relation, given which of its readings are registered submit
 * ids: a vote when exactly one distinct reading is registered and another is not; nothing when
 * every reading agrees (no information), none is registered (not submitted yet, or by nobody we
 * know) or several are (ambiguous).
 */
export function receiptVote(readings: ReadonlyMap<IdRelation, string>, registered: ReadonlySet<string>): IdVote | null {
  const refs = distinctRefs(readings);
  if (refs.length < 2) return null;
  const hits = refs.filter((ref) => registered.has(ref));
  if (hits.length !== 1) return null;
  const vote: IdVote = { for: [], against: [] };
  for (const [relation, ref] of readings) (ref === hits[0] ? vote.for : vote.against).push(relation);
  return vote;
}

export type IdEvidence = Record<IdRelation, { for: number; against: number }>;

export function noEvidence(): IdEvidence {
  return { same: { for: 0, against: 0 }, 'hex-dec': { for: 0, against: 0 }, 'dec-hex': { for: 0, against: 0 } };
}

export function addVote(evidence: IdEvidence, vote: IdVote): void {
  for (const r of vote.for) evidence[r].for++;
  for (const r of vote.against) evidence[r].against++;
}

/** Votes for every vote against a relation that it still needs (a stray vote: a lost or late index entry). */
const AGAINST_WEIGHT = 16;

/**
 * The relation the evidence decides: the only open relation with at least `minVotes` votes, plus
 * AGAINST_WEIGHT for each vote against it. Null while none or more than one qualifies (two
 * relations never told apart yet).
 */
export function decideRelation(evidence: IdEvidence, relations: readonly IdRelation[], minVotes = 3): IdRelation | null {
  const qualified = relations.filter((r) => evidence[r].for >= minVotes + AGAINST_WEIGHT * evidence[r].against);
  return qualified.length === 1 ? qualified[0]! : null;
}
