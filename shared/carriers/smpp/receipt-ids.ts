/**
 * Which ref a receipt names, for one connection (the rule is in id-forms.ts).
 *
 * - Both id forms configured: the receipt's id read in its form is the ref. No Redis.
 * - `auto` (the default) once the SMSC's relation is known: the one reading under it. No Redis,
 *   so nothing Redis loses can send a receipt to another message; the engine keeps the refs
 *   durably (`carrier_refs`) and parks a receipt whose ref is not registered yet.
 * - `auto` while the relation is being learned (the first receipts of a connection): every
 *   accepted id is indexed once (`id:<ref>`, and remembered by the process that accepted it, so
 *   an entry Redis loses still counts there), and a receipt whose readings all agree is reported
 *   at once. One with several readings is looked up against the index: when exactly one of its
 *   readings is registered, and still is after `voteGraceMs` (its own id may be on its way into
 *   the index), it is a vote for that relation. If that reading is the id as written (`same`) and
 *   no votes favour another relation, it names that message (so a lone first message is not kept
 *   waiting); a reading whose receipt was applied leaves the index, so a finished message is never
 *   offered to a later receipt. Anything else is never guessed: the receipt is kept in Redis
 *   (`rcpt:parked`, acknowledged to the SMSC once stored), applied when the relation is known, or
 *   dropped with a warning after `parkedMaxMs`. The first process whose
 *   votes decide (`minVotes`, see decideRelation) stores the relation (`idform:<smsc>`); every
 *   other one reads it from the answer of its next index write or lookup. From then on nothing
 *   is indexed or looked up.
 * - A sink that matches refs against the engine's registrations (CarrierSink.matchRefs: refs registered
 *   to attempts not yet final, in Postgres) replaces the index while learning: nothing is indexed,
 *   a lost entry cannot hide a receipt's own message, and the one live reading is taken whatever
 *   the relation it votes for.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { StatusReport } from '../types.js';
import type { MessageIdForm } from './pdu.js';
import type { SmppRedisStore } from './redis-store.js';
import {
  addVote,
  decideRelation,
  distinctRefs,
  isIdRelation,
  noEvidence,
  openRelations,
  receiptReadings,
  receiptRefUnder,
  receiptVote,
  type IdRelation,
} from './id-forms.js';

export interface ReceiptIdLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface ReceiptIdsOptions {
  submitForm: MessageIdForm;
  receiptForm: MessageIdForm;
  /** The store of the connection whose refs receipts are matched against (its index, its parked receipts). */
  store: SmppRedisStore;
  /** Where parked receipts go once their ref is known (the carrier's sink). */
  report(reports: StatusReport[]): Promise<unknown>;
  /** Carrier name the receipts are reported under. */
  carrier: string;
  logger: ReceiptIdLogger;
  /** Votes a relation needs; default 3. */
  minVotes?: number;
  /** How long a receipt with one registered reading waits before that is checked again; default 500 ms. */
  voteGraceMs?: number;
  /** How long a parked receipt is kept while the relation stays unknown; default 6 h. */
  parkedMaxMs?: number;
  /**
   * Which of `refs` are registered (durably, by the engine) to attempts still waiting for their
   * receipt. When given, it replaces the Redis index while learning (CarrierSink.matchRefs).
   */
  matchRefs?: (refs: string[]) => Promise<string[]>;
}

/** A receipt as the carrier would report it, without its ref. */
export type UnmatchedReceipt = Omit<StatusReport, 'ref' | 'carrier'>;

/** Refs accepted while learning that a process remembers. */
const RECENT_MAX = 50_000;

/** Re-stores a learned relation at most this often (in case Redis lost it). */
const REASSERT_MS = 10 * 60_000;

export class ReceiptIds {
  private readonly submitForm: MessageIdForm;
  private readonly receiptForm: MessageIdForm;
  private readonly open: IdRelation[];
  private readonly store: SmppRedisStore;
  private readonly minVotes: number;
  private readonly voteGraceMs: number;
  private readonly parkedMaxMs: number;
  private relation: IdRelation | null = null;
  /** Refs this process accepted while learning (see accepted()). */
  private readonly recent = new Set<string>();
  private readonly evidence = noEvidence();
  private parkTimer: NodeJS.Timeout | null = null;
  private draining: Promise<void> | null = null;
  private assertedAt = 0;
  /** Receipts this process parked (for the log). */
  private parked = 0;
  private warnedUnfit = false;
  private closed = false;

  constructor(private readonly options: ReceiptIdsOptions) {
    this.submitForm = options.submitForm;
    this.receiptForm = options.receiptForm;
    this.open = openRelations(options.submitForm, options.receiptForm);
    this.store = options.store;
    this.minVotes = options.minVotes ?? 3;
    this.voteGraceMs = options.voteGraceMs ?? 500;
    this.parkedMaxMs = options.parkedMaxMs ?? 6 * 3600_000;
    if (this.open.length === 1) this.relation = this.open[0]!;
  }

  /** The relation in use: learned, the only one open, or null (explicit forms, or not learned yet). */
  get known(): IdRelation | null {
    return this.relation;
  }

  /** Whether accepted ids are indexed for receipts (the relation is still being learned). */
  get indexing(): boolean {
    return this.open.length > 1 && this.relation === null;
  }

  /**
   * An id this process had accepted (its ref): while learning, remembered here too, since an index
   * entry Redis lost would make another reading look like the only registered one. Returns whether
   * to index it.
   */
  accepted(ref: string): boolean {
    if (!this.indexing || ref === '') return false;
    this.recent.add(ref);
    if (this.recent.size > RECENT_MAX) this.recent.delete(this.recent.values().next().value!);
    return !this.options.matchRefs; // the engine's registrations serve instead
  }

  /**
   * The ref a receipt id names when that needs no waiting (forms declared, or the SMSC's learned);
   * null when it cannot be read; undefined when only `resolve` can tell.
   */
  refNow(id: string): string | null | undefined {
    if (this.open.length === 0) return receiptRefUnder(id, 'same', this.receiptForm);
    if (this.relation) return this.refUnderKnown(id);
    return undefined;
  }

  /**
   * The ref a receipt id names; null when it cannot be read; undefined when it was parked (in
   * Redis, durably) because its id has several readings and none can be told to be its own yet.
   */
  async resolve(id: string, receipt: UnmatchedReceipt): Promise<string | null | undefined> {
    const now = this.refNow(id);
    if (now !== undefined) return now;
    const readings = receiptReadings(id, this.open, this.submitForm);
    const refs = distinctRefs(readings);
    if (refs.length <= 1) return refs[0] ?? null;
    // A submit_sm_resp read in the same socket chunk is handled in promise callbacks queued before
    // this one: let them register their id first.
    await nextTurn();
    let vote = receiptVote(readings, await this.registered(refs));
    if (this.relation) return this.refUnderKnown(id);
    if (vote) {
      // The one reading registered may be another message's while this receipt's own id is still on
      // its way (a receipt overtaking its response): it counts only if it is still the only one later.
      await sleep(this.voteGraceMs);
      const again = receiptVote(readings, await this.registered(refs));
      if (this.relation) return this.refUnderKnown(id);
      vote = again && again.for.join() === vote.for.join() ? again : null;
    }
    if (vote) {
      const favoured = decideRelation(this.evidence, this.open, 1);
      addVote(this.evidence, vote);
      await this.decide();
      if (this.relation) return this.refUnderKnown(id);
      // Before the relation is known, a receipt is taken only as the id was written (`same`, what
      // nearly every SMSC does) and only while no votes favour another relation. A converted
      // reading being the only one registered may just mean its own id is missing (lost, late).
      // With the engine's registrations (durable, finished attempts left out) any relation may be taken.
      const taken = this.options.matchRefs ? vote.for[0]! : 'same';
      if (vote.for.includes(taken) && (favoured === null || favoured === taken)) {
        const ref = readings.get(taken)!;
        this.recent.delete(ref); // final: no longer a reading for other receipts
        this.store.forgetIndexed(ref).catch(() => undefined);
        return ref;
      }
    }
    await this.store.parkReceipt({ id, state: receipt.state, resultInfo: receipt.resultInfo, at: receipt.at, parkedAt: Date.now() },
      Math.ceil(this.parkedMaxMs / 1000) + 600);
    if (this.parked++ === 0) {
      this.options.logger.info({ carrier: this.options.carrier, id, readings: refs },
        'SMPP receipts whose ids have several readings are kept until the SMSC\'s id form is learned');
    }
    this.armParkCheck();
    return undefined;
  }

  /** A relation read from Redis (an index write or a lookup found one). */
  adopt(value: string): void {
    if (this.relation !== null || this.closed) return;
    if (!isIdRelation(value) || !this.open.includes(value)) {
      if (!this.warnedUnfit) {
        this.warnedUnfit = true;
        this.options.logger.warn({ carrier: this.options.carrier, stored: value, open: this.open },
          'stored SMPP id form does not fit this connection\'s submit_id/receipt_id; ignored');
      }
      return;
    }
    this.relation = value;
    this.recent.clear();
    this.assertedAt = Date.now();
    this.options.logger.info({ carrier: this.options.carrier, relation: value }, 'SMPP id form learned');
    void this.drainParked();
  }

  close(): void {
    this.closed = true;
    if (this.parkTimer) clearTimeout(this.parkTimer);
    this.parkTimer = null;
  }

  private refUnderKnown(id: string): string | null {
    const now = Date.now();
    if (this.open.length > 1 && now - this.assertedAt > REASSERT_MS) {
      this.assertedAt = now;
      this.store.saveIdForm(this.relation!).catch(() => undefined);
    }
    // An id the relation cannot read (letters in a decimal one) is taken as written.
    return receiptRefUnder(id, this.relation!, this.submitForm) ?? receiptRefUnder(id, 'same', this.submitForm);
  }

  /**
   * The readings registered as submit ids of this connection: indexed in Redis, or accepted by this
   * process (adopts a relation found stored meanwhile).
   */
  private async registered(refs: string[]): Promise<Set<string>> {
    const matchRefs = this.options.matchRefs;
    const [seen, live] = await Promise.all([this.store.lookupIds(matchRefs ? [] : refs), matchRefs ? matchRefs(refs) : []]);
    if (seen.idForm !== null) this.adopt(seen.idForm);
    for (const ref of live) seen.indexed.add(ref);
    for (const ref of refs) if (this.recent.has(ref)) seen.indexed.add(ref);
    return seen.indexed;
  }

  /** Stores the relation once the votes decide it (the first one stored wins, in every process). */
  private async decide(): Promise<void> {
    const decided = decideRelation(this.evidence, this.open, this.minVotes);
    if (decided && this.relation === null) this.adopt(await this.store.saveIdForm(decided));
  }

  /** Applies the parked receipts under the learned relation. */
  private drainParked(): Promise<void> {
    this.draining ??= (async () => {
      const parked = await this.store.parkedReceipts();
      if (parked.size === 0) return;
      const reports: StatusReport[] = [];
      for (const r of parked.values()) {
        const ref = this.refUnderKnown(r.id);
        if (ref) reports.push({ carrier: this.options.carrier, ref, state: r.state, resultInfo: r.resultInfo, at: r.at });
      }
      if (reports.length > 0) await this.options.report(reports);
      await this.store.forgetParked([...parked.keys()]);
      this.options.logger.info({ carrier: this.options.carrier, receipts: parked.size }, 'SMPP receipts kept until the id form was known: applied');
    })().catch((err: unknown) => {
      this.options.logger.warn({ err, carrier: this.options.carrier }, 'SMPP parked receipts not applied yet; retrying');
      this.armParkCheck();
    }).finally(() => {
      this.draining = null;
    });
    return this.draining;
  }

  /** Once a minute while receipts are parked: apply them when the relation is known, drop those past the bound. */
  private armParkCheck(): void {
    if (this.parkTimer || this.closed) return;
    this.parkTimer = setTimeout(() => {
      this.parkTimer = null;
      void this.checkParked();
    }, Math.min(60_000, this.parkedMaxMs));
    this.parkTimer.unref();
  }

  private async checkParked(): Promise<void> {
    try {
      if (!this.relation) {
        // Another process may have learned it meanwhile.
        const { idForm } = await this.store.lookupIds([]);
        if (idForm !== null) this.adopt(idForm);
      }
      if (this.relation) {
        await this.drainParked();
        return;
      }
      const parked = await this.store.parkedReceipts();
      const stale = [...parked].filter(([, r]) => Date.now() - r.parkedAt >= this.parkedMaxMs);
      if (stale.length > 0) {
        await this.store.forgetParked(stale.map(([field]) => field));
        this.options.logger.warn({
          carrier: this.options.carrier, receipts: stale.length, ids: stale.slice(0, 10).map(([, r]) => r.id), keptMs: this.parkedMaxMs,
        }, 'SMPP receipts dropped: their ids have several readings and the SMSC\'s id form was not learned in time; set submit_id and receipt_id');
      }
      if (parked.size > stale.length) this.armParkCheck();
    } catch (err) {
      this.options.logger.warn({ err, carrier: this.options.carrier }, 'SMPP parked receipts not checked; retrying');
      this.armParkCheck();
    }
  }
}
