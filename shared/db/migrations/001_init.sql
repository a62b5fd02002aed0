-- Switchboard schema. Postgres is the system of record; Redis carries only queues and counters,
-- so every job can be rebuilt from these tables.

CREATE TABLE accounts (
  id                      bigserial PRIMARY KEY,
  name                    text        NOT NULL DEFAULT '',
  country                 char(2)     NOT NULL DEFAULT 'CZ',
  currency                text        NOT NULL CHECK (currency IN ('CZK', 'EUR')),
  credit_czk              numeric(18,4) NOT NULL DEFAULT 0,
  credit_eur              numeric(18,4) NOT NULL DEFAULT 0,
  default_sender          text,
  verification_secret     text,
  verification_attempts   integer     NOT NULL DEFAULT 6,
  verification_expiry_s   integer     NOT NULL DEFAULT 600,
  verification_template   text        NOT NULL DEFAULT 'Your verification code is {code}',
  verify_account_per_min  integer     NOT NULL DEFAULT 60,
  verify_phone_per_hour   integer     NOT NULL DEFAULT 5,
  verify_phone_cooldown_s integer     NOT NULL DEFAULT 30,
  reply_window_days       integer     NOT NULL DEFAULT 7,
  created_at              timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored as SHA-256 (D1) and found by that hash; only a short prefix is kept readable.
CREATE TABLE api_keys (
  id                   bigserial PRIMARY KEY,
  account_id           bigint      NOT NULL REFERENCES accounts(id),
  is_primary           boolean     NOT NULL,
  key_hash             bytea       NOT NULL UNIQUE,
  key_prefix           text        NOT NULL,
  note                 text        NOT NULL DEFAULT '',
  default_callback_url text,
  shared               boolean     NOT NULL DEFAULT true,
  currency             text        NOT NULL CHECK (currency IN ('CZK', 'EUR')),
  balance              numeric(18,4) NOT NULL DEFAULT 0,
  disabled             boolean     NOT NULL DEFAULT false,
  webhook_secret       text,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX api_keys_one_primary ON api_keys (account_id) WHERE is_primary;
CREATE INDEX api_keys_account ON api_keys (account_id);

-- One row per accepted message object.
CREATE TABLE messages (
  id            text        PRIMARY KEY,
  request_id    uuid        NOT NULL,
  account_id    bigint      NOT NULL,
  key_id        bigint      NOT NULL,
  body          text,
  flow          jsonb       NOT NULL,
  callback      text,
  tag           text        NOT NULL,
  lane          smallint    NOT NULL,  -- 0 priority, 1 transactional, 2 promotional
  params        jsonb,
  payload       json,                  -- json, not jsonb: the text comes back exactly as stored
  send_at       timestamptz,
  delivery_time jsonb,
  source        text        NOT NULL,  -- v2 | v1 | simple | xml | verify
  created_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per recipient: its current flow step and overall result (the latest attempt's).
CREATE TABLE recipients (
  id           bigserial   PRIMARY KEY,
  public_id    text        NOT NULL UNIQUE,
  message_id   text        NOT NULL REFERENCES messages(id),
  idx          smallint    NOT NULL,
  account_id   bigint      NOT NULL,
  key_id       bigint      NOT NULL,
  tag          text        NOT NULL,
  raw_phone    text        NOT NULL,
  phone        text,                   -- E.164 digits; null when it cannot be normalised ([302])
  state        text        NOT NULL DEFAULT 'queued',
  step         smallint    NOT NULL DEFAULT 0,
  due_at       timestamptz,            -- when the current step should start (null: started or done)
  flow_taken   text        NOT NULL DEFAULT '',
  body         text,
  sender       text,
  parts        integer     NOT NULL DEFAULT 0,
  ts_sent      timestamptz,
  ts_delivered timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX recipients_message ON recipients (message_id);
CREATE INDEX recipients_key_day ON recipients (key_id, created_at, id);
CREATE INDEX recipients_account_day ON recipients (account_id, created_at, id);
CREATE INDEX recipients_due ON recipients (due_at) WHERE state = 'queued';

-- One row per attempt (recipient x flow step), D3.
CREATE TABLE attempts (
  id               bigserial   PRIMARY KEY,
  recipient_id     bigint      NOT NULL REFERENCES recipients(id),
  step             smallint    NOT NULL,
  channel          text        NOT NULL,
  family           text        NOT NULL,  -- sms | viber | whatsapp (reply matching, D5)
  state            text        NOT NULL,
  result_info      text        NOT NULL DEFAULT '',
  phone            text        NOT NULL,
  sender           text        NOT NULL,
  carrier          text        NOT NULL,
  parts            integer     NOT NULL DEFAULT 1,
  encoding         text,
  country          integer     NOT NULL DEFAULT 0,
  operator         integer     NOT NULL DEFAULT 0,
  price_czk        numeric(18,4) NOT NULL DEFAULT 0,
  price_eur        numeric(18,4) NOT NULL DEFAULT 0,
  charged          numeric(18,4) NOT NULL DEFAULT 0,
  charged_currency text,
  payer_kind       text,                  -- account | key
  payer_id         bigint,
  refunded         boolean     NOT NULL DEFAULT false,
  reached_sent     boolean     NOT NULL DEFAULT false,
  ttl_expired      boolean     NOT NULL DEFAULT false,  -- ended undelivered by its ttl: a late receipt may still be reported
  refs_total       integer     NOT NULL DEFAULT 0,
  refs_delivered   integer     NOT NULL DEFAULT 0,
  handed_at        timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (recipient_id, step)
);
CREATE INDEX attempts_reply ON attempts (phone, family, sender, created_at DESC);
CREATE INDEX attempts_unhanded ON attempts (created_at) WHERE handed_at IS NULL AND state = 'sending';

-- Carrier message ids (one per SMS part) and receipts that arrived before their id was stored.
CREATE TABLE carrier_refs (
  carrier    text    NOT NULL,
  ref        text    NOT NULL,
  attempt_id bigint  NOT NULL,
  part       integer NOT NULL DEFAULT 0,
  state      text    NOT NULL DEFAULT 'sent',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (carrier, ref)
);
CREATE TABLE pending_receipts (
  id          bigserial PRIMARY KEY,
  carrier     text   NOT NULL,
  ref         text   NOT NULL,
  state       text   NOT NULL,
  result_info text   NOT NULL,
  at          timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_receipts_ref ON pending_receipts (carrier, ref);

-- The webhook outbox: written in the same transaction as the change it reports.
CREATE TABLE events (
  id           bigserial   PRIMARY KEY,
  account_id   bigint      NOT NULL,
  key_id       bigint,
  callback_url text,                    -- resolved when written (D4 precedence); null: kept, not sent
  recipient_id bigint,
  kind         text        NOT NULL,    -- sentMessage | incomingReplyMessage | incomingMessage
  body         text        NOT NULL,    -- the event object as JSON
  batch_id     bigint,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_unrelayed ON events (id) WHERE batch_id IS NULL AND callback_url IS NOT NULL;
CREATE INDEX events_recipient ON events (recipient_id);
CREATE INDEX events_account ON events (account_id, id);

CREATE TABLE webhook_batches (
  id           bigserial   PRIMARY KEY,
  webhook_id   text        NOT NULL,   -- Standard Webhooks id, stable across retries
  account_id   bigint      NOT NULL,
  key_id       bigint,
  url          text        NOT NULL,
  event_ids    bigint[]    NOT NULL,
  status       text        NOT NULL DEFAULT 'pending',  -- pending | delivered | dead
  attempts     integer     NOT NULL DEFAULT 0,
  last_status  integer,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  dead_at      timestamptz
);
CREATE INDEX webhook_batches_pending ON webhook_batches (updated_at) WHERE status = 'pending';
CREATE INDEX webhook_batches_dead ON webhook_batches (key_id, dead_at) WHERE status = 'dead';

CREATE TABLE inbound_messages (
  id                 bigserial   PRIMARY KEY,
  account_id         bigint,
  gateway            text        NOT NULL,
  sender             text        NOT NULL,
  recipient          text        NOT NULL,
  body               text        NOT NULL,
  sent_at            timestamptz NOT NULL,
  reply_to_attempt   bigint,
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbound_account ON inbound_messages (account_id, id);

-- Numbers and sender names that receive inbound traffic (D5).
CREATE TABLE number_assignments (
  id         bigserial PRIMARY KEY,
  account_id bigint    NOT NULL REFERENCES accounts(id),
  value      text      NOT NULL UNIQUE,
  channels   text[]    NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Price per billing segment; the longest matching calling-code prefix wins, '' matches every number.
CREATE TABLE prices (
  channel   text    NOT NULL CHECK (channel IN ('sms', 'viber', 'whatsapp_text', 'whatsapp_template')),
  prefix    text    NOT NULL CHECK (prefix ~ '^[0-9]*$'),
  operator  integer NOT NULL DEFAULT 0,   -- MNC; 0 any operator
  price_czk numeric(12,4) NOT NULL CHECK (price_czk >= 0),
  price_eur numeric(12,4) NOT NULL CHECK (price_eur >= 0),
  PRIMARY KEY (channel, prefix, operator)
);
INSERT INTO prices (channel, prefix, price_czk, price_eur) VALUES
  ('sms', '', 1.2000, 0.0500),
  ('viber', '', 0.6000, 0.0250),
  ('whatsapp_text', '', 0.5000, 0.0200),
  ('whatsapp_template', '', 1.0000, 0.0400),
  ('sms', '420', 0.9000, 0.0360),
  ('sms', '421', 0.9500, 0.0380);

-- Carrier connections (SMPP and later channels) and destination-prefix routes.
CREATE TABLE carrier_connections (
  id         bigserial PRIMARY KEY,
  name       text      NOT NULL UNIQUE,
  kind       text      NOT NULL,
  url        text      NOT NULL,
  enabled    boolean   NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE carrier_routes (
  id            bigserial PRIMARY KEY,
  connection_id bigint    NOT NULL REFERENCES carrier_connections(id) ON DELETE CASCADE,
  channel       text      NOT NULL DEFAULT 'sms',
  prefix        text      NOT NULL CHECK (prefix ~ '^[0-9]*$'),
  UNIQUE (channel, prefix)
);

CREATE TABLE validations (
  id                 bigserial   PRIMARY KEY,
  token              text        NOT NULL UNIQUE,
  account_id         bigint      NOT NULL,
  key_id             bigint      NOT NULL,
  phone              text        NOT NULL,
  status             text        NOT NULL DEFAULT 'pending',
  code_hash          bytea       NOT NULL,
  code_enc           text,                 -- encrypted code, cleared once handed to the carrier (D8)
  attempts_remaining integer     NOT NULL,
  started_at         timestamptz NOT NULL,
  expires_at         timestamptz NOT NULL,
  verified_at        timestamptz,
  recipient_id       bigint,
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX validations_recipient ON validations (recipient_id);

-- What the sandbox carrier carried (D10), readable back by the owning account.
CREATE TABLE sandbox_messages (
  id           bigserial   PRIMARY KEY,
  account_id   bigint      NOT NULL,
  recipient_id text        NOT NULL,
  attempt_id   bigint      NOT NULL UNIQUE,
  gateway      text        NOT NULL,
  sender       text        NOT NULL,
  phone_number text        NOT NULL,
  body         text        NOT NULL,
  parts        integer     NOT NULL,
  encoding     text,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_messages_lookup ON sandbox_messages (account_id, phone_number, id DESC);
