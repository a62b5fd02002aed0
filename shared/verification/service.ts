/**
 * The verification API's domain logic (D8): start a session (credit check, rate limits, code, SMS
 * through the ordinary accept path), check a code, report a session, and check proofs against the
 * stored session or offline. HTTP shapes live in api/routes/verify.ts.
 *
 * Status moves: pending → code_sent (the code SMS is delivered, engine hook) → verified (right
 * code); pending/code_sent → failed (attempts used up) or expired (expiry passed; written lazily
 * when the session is next read). A code is accepted in pending and in code_sent.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CountryCode } from 'libphonenumber-js';
import { prepared, withTx, type Db, type Tx } from '../db/pool.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { Redis } from '../redis.js';
import type { Queues } from '../queues.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { currentPrices, findPrice } from '../domain/prices.js';
import { ROUTING_CONFIG_VERSION_SQL } from '../domain/routing-config.js';
import { planSms } from '../sms/gsm7.js';
import { normalizePhone } from '../phone/normalize.js';
import { acceptMessages, TEST_NUMBER } from '../sending/accept.js';
import { verificationKeys, type VerificationKeys } from './secrets.js';
import { SecretBox } from '../secrets/sealed.js';
import { VERIFICATION_SECRET, openRowSecret } from '../secrets/row-secrets.js';
import { CODE_PATTERN, codeMatches, encryptCode, fillTemplate, generateCode, hashCode, maskedTemplate } from './codes.js';
import { mintToken, parseToken } from './tokens.js';
import { checkProof, computeProof, proofExpired, type ProofCheck, type ProofInput } from './proof.js';
import { admitStart } from './rate-limit.js';
import { PAYING_BALANCE_SQL } from '../domain/payer.js';
import { toUnits } from '../domain/money.js';
import { countVerificationCheck, countVerificationStart } from '../metrics.js';
import {
  expired, insufficientCredit, invalidCode, impossiblePhone, invalidPhone, rateLimited, tooManyAttempts, validationNotFound,
} from './errors.js';

export const PHONE_PATTERN = /^[1-9]\d{6,14}$/;
export type ValidationStatus = 'pending' | 'code_sent' | 'verified' | 'failed' | 'expired';

export interface VerificationDeps {
  db: Db;
  redis: Redis;
  queues: Queues;
  config: Config;
  logger: Logger;
}

export interface StartAnswer {
  token: string;
  status: 'pending';
  expiresAt: string;
  timestamp: string;
}

export interface SessionView {
  token: string;
  status: ValidationStatus;
  phoneNumber: string;
  expiresAt: string;
  timestamp: string;
  attemptsRemaining: number;
  verifiedAt?: string;
}

export interface VerifiedAnswer {
  verified: true;
  phoneNumber: string;
  token: string;
  code: string;
  timestamp: string;
  proof?: string;
  verifiedAt: string;
}

export interface ProofAnswer {
  valid: boolean;
  expired?: true;
  phoneNumber: string;
  verifiedAt: string | null;
}

interface StartSettings {
  verification_attempts: number;
  verification_expiry_s: number;
  verification_template: string;
  verify_account_per_min: number;
  verify_phone_per_hour: number;
  verify_phone_cooldown_s: number;
  balance: number;
  /** The stored routing configuration's version (shared/domain/routing-config.ts), for the price check. */
  routing_config_version: number;
}

interface SessionRow {
  id: number;
  token: string;
  account_id: number;
  phone: string;
  status: ValidationStatus;
  code_hash: Buffer;
  attempts_remaining: number;
  started_at: Date;
  expires_at: Date;
  verified_at: Date | null;
  proof_mac: Buffer | null;
  verification_secret: string | null;
  verification_secret_sealed: Buffer | null;
}


const iso = (d: Date) => d.toISOString();

/** Outcome of a code check, decided inside the transaction and answered after it commits. */
type VerifyOutcome =
  | { kind: 'ok'; answer: VerifiedAnswer }
  | { kind: 'invalid'; remaining: number }
  | { kind: 'expired' }
  | { kind: 'too_many' };

const VERIFY_OUTCOME_LABEL: Record<VerifyOutcome['kind'], string> = { ok: 'verified', invalid: 'invalid_code', expired: 'expired', too_many: 'too_many_attempts' };

export class VerificationService {
  /** Opens the server's master secret and the accounts' verification secrets (CREDENTIALS_KEY). */
  private readonly box: SecretBox;

  constructor(private readonly deps: VerificationDeps) {
    this.box = new SecretBox(deps.config.credentialsKey);
  }

  private keys(): Promise<VerificationKeys> {
    return verificationKeys(this.deps.db, this.box);
  }

  /** The account's verification secret (the proofs' HMAC key) of a row that read both its columns. */
  private secretOf(accountId: number, row: { verification_secret: string | null; verification_secret_sealed: Buffer | null }): string | null {
    return openRowSecret(this.box, VERIFICATION_SECRET, accountId, row.verification_secret_sealed, row.verification_secret);
  }

  /**
   * Start a session. Order: number shape → credit → rate limits → session + SMS. A start that is
   * refused before the rate limiter (bad number, no credit) never touches the counters; one that
   * fails after it (database or queue error) gives its slot back, so only sessions that exist
   * count against the limits.
   */
  async start(key: ApiKeyRecord, phoneNumber: string, now = new Date()): Promise<StartAnswer> {
    if (!PHONE_PATTERN.test(phoneNumber)) {
      throw invalidPhone();
    }
    // The pattern says "with country code": read it as international, never as a national number.
    const e164 = normalizePhone(`+${phoneNumber}`, key.accountCountry as CountryCode);
    if (!e164) {
      throw impossiblePhone();
    }
    const { db } = this.deps;
    // Named statements (this one, the insert below): unnamed ones were planned on every start.
    const { rows } = await db.query<StartSettings>(prepared(
      `SELECT a.verification_attempts, a.verification_expiry_s, a.verification_template,
              a.verify_account_per_min, a.verify_phone_per_hour, a.verify_phone_cooldown_s,
              ${PAYING_BALANCE_SQL} AS balance, ${ROUTING_CONFIG_VERSION_SQL} AS routing_config_version
         FROM api_keys k JOIN accounts a ON a.id = k.account_id
        WHERE k.id = $1`,
      [key.id]),
    );
    const settings = rows[0];
    if (!settings) {
      throw new Error(`api key ${key.id} vanished`);
    }
    await this.checkCredit(key, e164, settings);

    const limit = await admitStart(this.deps.redis, this.deps.config.redisPrefix, key.accountId, e164, {
      accountPerMin: settings.verify_account_per_min,
      phonePerHour: settings.verify_phone_per_hour,
      phoneCooldownS: settings.verify_phone_cooldown_s,
    });
    if (!limit.admitted) {
      throw rateLimited(limit.error, limit.retryAfterS);
    }
    try {
      return await this.createSession(key, phoneNumber, settings, now);
    } catch (err) {
      await limit.release().catch(() => undefined);
      throw err;
    }
  }

  /**
   * "No credit for the SMS at start: 402 and no session" (D8). The payer rule of the engine: an
   * own-credit sub-key pays from its balance, every other key from the account's credit in the
   * key's currency; price = parts x unit price. This is a check, not a reservation (D3): the SMS
   * is charged at hand-over, where a balance spent meanwhile still rejects it with [307].
   */
  private async checkCredit(key: ApiKeyRecord, e164: string, settings: StartSettings): Promise<void> {
    if (e164 === TEST_NUMBER) {
      return; // never sent, never charged (D2)
    }
    // The process's price copy, read again when a price stored since is newer than it (as dispatch
    // does): a start right after a price change is checked at the new price.
    const price = findPrice(await currentPrices(this.deps.db, settings.routing_config_version), 'sms', e164);
    if (!price) {
      return; // no price, no charge: routing reports [303] as for any SMS
    }
    // Any code has the same length and alphabet, so the part count is known before the code is.
    const parts = planSms(fillTemplate(settings.verification_template, '000000'), 'utf').parts.length;
    const unit = key.currency === 'CZK' ? price.price_czk : price.price_eur;
    if (toUnits(unit) * parts > toUnits(Number(settings.balance))) {
      throw insufficientCredit();
    }
  }

  private async createSession(key: ApiKeyRecord, phoneNumber: string, settings: StartSettings, now: Date): Promise<StartAnswer> {
    const keys = await this.keys();
    const token = mintToken(keys.token, key.accountId);
    const code = generateCode();
    const template = settings.verification_template;
    const expiresAt = new Date(now.getTime() + settings.verification_expiry_s * 1000);
    const message = {
      body: maskedTemplate(template), // messages.body never holds the code; the dispatch hook fills it in
      to: [{ phone_number: `+${phoneNumber}` }],
      flow: [{ sms: {} }],
      tag: 'priority',
    };
    await acceptMessages(this.deps, key, [message], {
      mode: 'single',
      source: 'verify',
      now,
      beforeCommit: async (tx, result) => {
        const entry = result.recipients[0]!;
        await tx.query(prepared(
          `INSERT INTO validations (token, account_id, key_id, phone, status, code_hash, code_enc, attempts_remaining,
                                    started_at, expires_at, recipient_id, sms_template, message_id)
           VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10, $11, $12)`,
          [token, key.accountId, key.id, phoneNumber, hashCode(keys.codeHash, token, code), encryptCode(keys.codeEnc, token, code),
            settings.verification_attempts, now, expiresAt, entry.recipientIds[0], template, entry.messageId]),
        );
      },
    });
    countVerificationStart();
    return { token, status: 'pending', expiresAt: iso(expiresAt), timestamp: iso(now) };
  }

  /** The session row of a token presented by `key`'s account (404 for a foreign, forged or unknown token). */
  private async findSession(q: Db | Tx, keys: VerificationKeys, accountId: number, token: string, lock: boolean): Promise<SessionRow> {
    const parsed = parseToken(keys.token, token);
    if (!parsed || parsed.accountId !== accountId) {
      throw validationNotFound();
    }
    const { rows } = await q.query<SessionRow>(prepared(
      `SELECT v.id, v.token, v.account_id, v.phone, v.status, v.code_hash, v.attempts_remaining, v.started_at, v.expires_at,
              v.verified_at, v.proof_mac, a.verification_secret, a.verification_secret_sealed
         FROM validations v JOIN accounts a ON a.id = v.account_id
        WHERE v.token = $1 AND v.account_id = $2${lock ? ' FOR UPDATE OF v' : ''}`,
      [token, accountId]),
    );
    const row = rows[0];
    if (!row) {
      throw validationNotFound();
    }
    return row;
  }

  /** Persist `expired` for a live session whose expiry passed (sessions expire lazily). */
  private async expireIfDue(q: Db | Tx, row: SessionRow, now: Date): Promise<void> {
    if ((row.status === 'pending' || row.status === 'code_sent') && now >= row.expires_at) {
      await q.query(
        `UPDATE validations SET status = 'expired', code_enc = NULL WHERE id = $1 AND status IN ('pending', 'code_sent')`,
        [row.id],
      );
      row.status = 'expired';
    }
  }

  async get(key: ApiKeyRecord, token: string, now = new Date()): Promise<SessionView> {
    const keys = await this.keys();
    const row = await this.findSession(this.deps.db, keys, key.accountId, token, false);
    await this.expireIfDue(this.deps.db, row, now);
    return {
      token: row.token,
      status: row.status,
      phoneNumber: row.phone,
      expiresAt: iso(row.expires_at),
      timestamp: iso(row.started_at),
      attemptsRemaining: row.attempts_remaining,
      ...(row.verified_at && { verifiedAt: iso(row.verified_at) }),
    };
  }

  /**
   * Check a code. The row is locked, so concurrent guesses are counted one by one and can never
   * exceed the attempts. A wrong code consumes one attempt; at zero the session is `failed` and
   * every later call answers 429. A verified session answers the right code again with the same
   * result (a client may retry after a lost response); wrong codes still consume attempts there,
   * but never undo the verification.
   */
  async verify(key: ApiKeyRecord, token: string, code: string, now = new Date()): Promise<VerifiedAnswer> {
    const keys = await this.keys();
    const outcome = await withTx(this.deps.db, async (tx): Promise<VerifyOutcome> => {
      const row = await this.findSession(tx, keys, key.accountId, token, true);
      if (row.status === 'failed' || row.attempts_remaining <= 0) {
        return { kind: 'too_many' };
      }
      await this.expireIfDue(tx, row, now);
      if (row.status === 'expired') {
        return { kind: 'expired' };
      }
      const right = CODE_PATTERN.test(code) && codeMatches(keys.codeHash, token, code, row.code_hash);
      if (!right) {
        const remaining = row.attempts_remaining - 1;
        const status = remaining === 0 && row.status !== 'verified' ? 'failed' : row.status;
        await tx.query(
          `UPDATE validations SET attempts_remaining = $2, status = $3,
                  code_enc = CASE WHEN $3 = 'failed' THEN NULL ELSE code_enc END
            WHERE id = $1`,
          [row.id, remaining, status],
        );
        return { kind: 'invalid', remaining };
      }
      const verifiedAt = row.verified_at ?? now;
      const timestamp = iso(row.started_at);
      const secret = this.secretOf(row.account_id, row);
      const proof = secret ? computeProof(secret, { phoneNumber: row.phone, token, code, timestamp }) : undefined;
      await tx.query(
        `UPDATE validations SET status = 'verified', verified_at = $2, proof_mac = $3, code_enc = NULL WHERE id = $1`,
        [row.id, verifiedAt, proof === undefined ? null : this.proofMac(keys, proof)],
      );
      return {
        kind: 'ok',
        answer: {
          verified: true, phoneNumber: row.phone, token, code, timestamp, ...(proof !== undefined && { proof }), verifiedAt: iso(verifiedAt),
        },
      };
    });
    countVerificationCheck(VERIFY_OUTCOME_LABEL[outcome.kind]);
    switch (outcome.kind) {
      case 'ok':
        return outcome.answer;
      case 'invalid':
        throw invalidCode(outcome.remaining);
      case 'expired':
        throw expired();
      case 'too_many':
        throw tooManyAttempts();
    }
  }

  private proofMac(keys: VerificationKeys, proof: string): Buffer {
    return createHmac('sha256', keys.proofStore).update(proof, 'utf8').digest();
  }

  /**
   * PATCH /v1/validations/{token} `{proof}`: the proof issued when this session was verified?
   * Only a MAC of that proof is stored (neither the code nor the proof), and it is compared in
   * constant time. A genuine proof older than 24 h answers `valid: false, expired: true`.
   */
  async checkStoredProof(key: ApiKeyRecord, token: string, proof: string, now = new Date()): Promise<ProofAnswer> {
    const keys = await this.keys();
    const row = await this.findSession(this.deps.db, keys, key.accountId, token, false);
    const given = this.proofMac(keys, proof);
    const matches = row.status === 'verified' && row.proof_mac !== null && row.proof_mac.length === given.length
      && timingSafeEqual(row.proof_mac, given);
    const base = { phoneNumber: row.phone, verifiedAt: row.verified_at ? iso(row.verified_at) : null };
    if (matches && proofExpired(row.started_at, now)) {
      return { valid: false, expired: true, ...base };
    }
    return { valid: matches, ...base };
  }

  /**
   * POST /v1/verify-proof: stateless. The token names the account (its MAC proves the service
   * minted it), whose current verification secret checks the HMAC; the session is not read.
   */
  async checkProofOffline(input: ProofInput & { proof: string }, now = new Date()): Promise<ProofCheck> {
    const keys = await this.keys();
    const parsed = parseToken(keys.token, input.token);
    if (!parsed) {
      return { valid: false };
    }
    const { rows } = await this.deps.db.query<{ verification_secret: string | null; verification_secret_sealed: Buffer | null }>(
      'SELECT verification_secret, verification_secret_sealed FROM accounts WHERE id = $1',
      [parsed.accountId],
    );
    const { proof, ...fields } = input;
    return checkProof(rows[0] ? this.secretOf(parsed.accountId, rows[0]) : null, fields, proof, now);
  }
}
