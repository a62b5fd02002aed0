-- Receipts parked without an attempt (their id was never registered: a message another system sent
-- over the same SMSC account or Viber connection, or one whose submit response was lost), by age:
-- the sweep deletes those older than RECEIPT_WAIT_HOURS (ParkedReceiptExpiry, shared/engine/parked-receipts.ts).
CREATE INDEX IF NOT EXISTS carrier_refs_parked ON carrier_refs (created_at) WHERE attempt_id IS NULL;
