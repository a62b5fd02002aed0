-- Opt-out (issue 27). An account's suppression list per channel family: numbers that answered an
-- opt-out keyword (STOP, ...) or were added through `POST /v1/suppressions`. Promotional sends to
-- them end `rejected` `[304] Recipient opted out`, uncharged (transactional and priority still go).
CREATE TABLE suppressions (
  account_id bigint      NOT NULL REFERENCES accounts(id),
  family     text        COLLATE "C" NOT NULL CHECK (family IN ('sms', 'viber', 'whatsapp')),
  phone      text        COLLATE "C" NOT NULL,
  source     text        NOT NULL CHECK (source IN ('keyword', 'api')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, family, phone)
);

-- suppressions: how many rows the account has in `suppressions`, kept by the statements that add
--   and remove them (row-locked increments). Dispatch reads it with the message row it reads
--   anyway, and looks the recipients up only when it is above zero (one lookup per job at most).
-- opt_out_promotional: whether promotional sends to suppressed numbers are refused (default yes).
-- opt_out_keywords / opt_in_keywords: the account's own keywords; null means the defaults.
ALTER TABLE accounts
  ADD COLUMN suppressions        integer NOT NULL DEFAULT 0,
  ADD COLUMN opt_out_promotional boolean NOT NULL DEFAULT true,
  ADD COLUMN opt_out_keywords    text[],
  ADD COLUMN opt_in_keywords     text[];
