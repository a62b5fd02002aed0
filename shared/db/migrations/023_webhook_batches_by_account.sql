-- Customers read their recent webhook deliveries (GET /v1/webhooks/deliveries: an account's
-- batches, newest first, or one key's). One index entry per batch (a batch carries up to 100
-- events), so the relay's inserts barely notice it. Old and new processes can overlap.
CREATE INDEX IF NOT EXISTS webhook_batches_account ON webhook_batches (account_id, id);
