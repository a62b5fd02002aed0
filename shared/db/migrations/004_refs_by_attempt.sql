-- Receipts of multi-part SMS count the delivered parts of their attempt on every status batch:
-- without this index that count read all of carrier_refs each time.
CREATE INDEX carrier_refs_attempt ON carrier_refs (attempt_id);
