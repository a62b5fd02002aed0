-- A change of credit as one function call, so that a transaction can send its balance changes
-- together with its COMMIT in one round trip (shared/db/pool.ts `withTxEnding`): the balance row
-- stays locked only while the server runs those statements and flushes the commit, not while the
-- answer travels back to a busy worker and its COMMIT travels in (a debit of one account's
-- dispatch batches otherwise queued every other batch of that account, priority messages
-- included, behind that client round trip).
-- A debit (negative delta) that the balance cannot cover changes nothing and fails with SQLSTATE
-- SB001, which aborts the transaction (and skips the COMMIT that follows it).
CREATE FUNCTION change_credit(payer_kind text, payer_id bigint, currency text, delta numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF payer_kind = 'key' THEN
    UPDATE api_keys SET balance = balance + delta WHERE id = payer_id AND (delta >= 0 OR balance >= -delta);
  ELSIF currency = 'CZK' THEN
    UPDATE accounts SET credit_czk = credit_czk + delta WHERE id = payer_id AND (delta >= 0 OR credit_czk >= -delta);
  ELSE
    UPDATE accounts SET credit_eur = credit_eur + delta WHERE id = payer_id AND (delta >= 0 OR credit_eur >= -delta);
  END IF;
  IF NOT FOUND AND delta < 0 THEN
    RAISE EXCEPTION 'the credit of % % does not cover %', payer_kind, payer_id, -delta USING ERRCODE = 'SB001';
  END IF;
END
$$;
