-- Recipients due now no longer carry due_at: starting them (queued -> sending) then changes no
-- indexed column, so the update can be HOT instead of adding an entry to every recipients index.
-- The recovery sweep finds a message whose dispatch job was lost by this flag instead; the flag is
-- cleared in the statement that starts (or defers) its recipients. Its recipients are those of the
-- message's account written at the message's created_at (one statement writes both, so the
-- timestamps are equal), found through recipients_account_day.
-- Measured (npm run bench, e2e-smpp 100,000, alternating runs with --setup-sql "DROP INDEX
-- recipients_due" as the bound): Postgres CPU per recipient 244 -> 211-216 µs, WAL 5.6 -> 5.2 KB.
-- Recipients queued before this migration keep their due_at and are swept as before.
ALTER TABLE messages ADD COLUMN dispatch_pending boolean NOT NULL DEFAULT false;
CREATE INDEX messages_dispatch_pending ON messages (created_at) WHERE dispatch_pending;
