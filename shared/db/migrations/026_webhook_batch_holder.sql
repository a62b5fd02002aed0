-- The process whose relay makes a batch's first delivery attempt itself (shared/webhooks/holders.ts):
-- its id, while its key lives in Redis, says that the batch is held in a live process's memory.
-- The recovery sweep queues a pending batch whose holder's key is gone without waiting a minute
-- for it. Cleared when an attempt's outcome is recorded (a retry job then stands for the batch).
-- NULL for batches made without direct delivery and for every batch written before this
-- migration (the sweep's one-minute rule covers them).
-- A nullable column without a default: no table rewrite.
ALTER TABLE webhook_batches ADD COLUMN IF NOT EXISTS holder text;
