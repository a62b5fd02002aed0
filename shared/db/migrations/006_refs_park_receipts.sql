-- A receipt that overtakes its submit response is parked in its own carrier_refs row (no attempt
-- yet) instead of a table beside it. Registering the ref and parking a receipt for it now write the
-- same unique key, so the index serialises them: whichever commits second finds the other's row
-- (INSERT … ON CONFLICT DO UPDATE), and no advisory lock per ref is needed.
ALTER TABLE carrier_refs ALTER COLUMN attempt_id DROP NOT NULL;
ALTER TABLE carrier_refs ADD COLUMN result_info text, ADD COLUMN reported_at timestamptz;
INSERT INTO carrier_refs (ref, carrier, attempt_id, state, result_info, reported_at)
SELECT DISTINCT ON (ref, carrier) ref, carrier, NULL, state, result_info, at
  FROM pending_receipts ORDER BY ref, carrier, id DESC
ON CONFLICT DO NOTHING;
DROP TABLE pending_receipts;
