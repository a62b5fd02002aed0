-- Carrier connections of every connector kind (D12): a kind's configuration as JSON, its secrets
-- sealed (AES-256-GCM with CREDENTIALS_KEY, shared/secrets/sealed.ts; never readable from the
-- database alone), and senders as their own table.
--
-- carrier_connections.url held an SMPP connection's URL, password included, in clear. It becomes
-- optional: a stored SMPP connection's URL (without its password) moves into config.url, its
-- password into `secrets`, when a process holding the key starts (services/runtime.ts seals rows
-- left with a password in `url`; migrations cannot, they have no key).
ALTER TABLE carrier_connections
  ALTER COLUMN url DROP NOT NULL,
  ADD COLUMN config jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN secrets bytea,
  ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
UPDATE carrier_connections SET config = jsonb_build_object('url', url) WHERE kind = 'smpp' AND url IS NOT NULL;

-- A prefix names one connection per channel only where routes pick the connection (SMS); WhatsApp
-- and Viber steps go through the connection of their sender's row, and their routes only restrict
-- destinations, so two connections may both cover every destination.
ALTER TABLE carrier_routes DROP CONSTRAINT carrier_routes_channel_prefix_key;
CREATE UNIQUE INDEX carrier_routes_connection_channel_prefix ON carrier_routes (connection_id, channel, prefix);
CREATE UNIQUE INDEX carrier_routes_sms_prefix ON carrier_routes (prefix) WHERE channel = 'sms';

-- The senders of an account on a channel family (a WhatsApp phone number id, a Viber sender name)
-- and the connection that carries them. Credentials (a business token) are sealed like a
-- connection's secrets; `details` holds what is not secret (WABA id, Viber service id).
CREATE TABLE carrier_senders (
  id            bigserial   PRIMARY KEY,
  account_id    bigint      NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  family        text        COLLATE "C" NOT NULL,
  sender        text        COLLATE "C" NOT NULL,
  connection_id bigint      NOT NULL REFERENCES carrier_connections(id) ON DELETE CASCADE,
  credentials   bytea,
  details       jsonb       NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, family, sender)
);
CREATE INDEX carrier_senders_connection ON carrier_senders (connection_id);
