-- Nothing reads events by account (webhooks read them by id, support by recipient), and every
-- event paid for this index: three entries per recipient. Measured with npm run bench
-- (--setup-sql "DROP INDEX events_account"): Postgres CPU per recipient 240-254 -> 224-236 µs.
-- An API that lists an account's events would bring its own index.
DROP INDEX IF EXISTS events_account;
