-- WhatsApp's customer-service window (channels.md 1.7): free text (`whatsapp_text`) may reach a
-- person only within 24 hours of their latest message to that business number. The connector
-- keeps, per business phone number id and person, when they last wrote (from inbound webhooks),
-- and ends a free-text attempt outside the window `undelivered` `[131047]` without calling Meta.
-- One row per pair, updated in place (never grows per message); the send path reads it by key.
CREATE TABLE whatsapp_windows (
  phone_number_id text        COLLATE "C" NOT NULL,
  user_number     text        COLLATE "C" NOT NULL,
  last_inbound_at timestamptz NOT NULL,
  PRIMARY KEY (phone_number_id, user_number)
);
