-- REST API (issue 6): `GET /v1/messages?phone_number=` is one range scan of this index, like the
-- unfiltered listing is of recipients_account_day / recipients_key_day. Without it a number
-- lookup reads the whole rest of the day's rows. A sub-key's query also names its account, so
-- the same index serves it (key_id is then checked on the few rows found).
CREATE INDEX IF NOT EXISTS recipients_account_phone_day ON recipients (account_id, phone, created_at, id);
