-- WhatsApp partner onboarding (D7): the signups a partner starts with POST /v1/whatsapp/signup,
-- and what a completed signup brought in: the client's WhatsApp Business Account (WABA), its
-- phone numbers and templates, per account. Secrets (the business token, a number's two-step PIN)
-- are sealed with CREDENTIALS_KEY like carrier credentials (shared/secrets/sealed.ts).

-- One signup: the partner's fields as given, where the hosted flow stands, and its session log
-- (`log`: a JSON array of {at, event, ...} entries: page opened, Embedded Signup's FINISH or
-- CANCEL, each backend step, each partner notification, errors with their step).
-- public_id is what the signup's JWT carries (the serial id is never shown).
-- status: created (API call) -> started (page opened) -> completing (backend steps running) ->
--   completed | failed; cancelled when the client left Embedded Signup (a new try is allowed
--   from cancelled and failed while the token is valid).
CREATE TABLE whatsapp_signups (
  id                   bigserial   PRIMARY KEY,
  public_id            uuid        NOT NULL UNIQUE,
  account_id           bigint      NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  key_id               bigint      NOT NULL REFERENCES api_keys(id),
  connection           text        COLLATE "C" NOT NULL,
  status               text        NOT NULL DEFAULT 'created'
                       CHECK (status IN ('created', 'started', 'completing', 'completed', 'cancelled', 'failed')),
  partner_name         text        NOT NULL,
  partner_logo         text,
  partner_callback_url text        NOT NULL,
  partner_client_id    text        NOT NULL,
  partner_finish_url   text        NOT NULL,
  phone_number         text        NOT NULL CHECK (phone_number IN ('manual', 'automatic')),
  wa_name              text        NOT NULL,
  wa_email             text        NOT NULL,
  wa_website           text        NOT NULL,
  country              text        NOT NULL,
  current_step         text,
  error                text,
  log                  jsonb       NOT NULL DEFAULT '[]',
  events_sent          integer     NOT NULL DEFAULT 0,
  business_id          text,
  waba_id              text,
  phone_number_ids     text[]      NOT NULL DEFAULT '{}',
  expires_at           timestamptz NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  completed_at         timestamptz
);
CREATE INDEX whatsapp_signups_account ON whatsapp_signups (account_id, created_at);

-- A client's WABA as an account holds it (an account may hold several; the D7 lists read these).
-- credentials: the business token of Embedded Signup's code exchange, sealed, bound to the row's
-- account and WABA. connection: the whatsapp carrier connection (its app) the token belongs to.
CREATE TABLE whatsapp_wabas (
  id                bigserial   PRIMARY KEY,
  account_id        bigint      NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  waba_id           text        COLLATE "C" NOT NULL,
  signup_id         bigint      REFERENCES whatsapp_signups(id) ON DELETE SET NULL,
  connection        text        COLLATE "C" NOT NULL,
  partner_client_id text        NOT NULL,
  business_id       text,
  name              text,
  currency          text,
  country           text,
  timezone_id       text,
  owner_name        text,
  owner_id          text,
  credentials       bytea       NOT NULL,
  subscribed        boolean     NOT NULL DEFAULT false,
  refreshed_at      timestamptz NOT NULL DEFAULT now(),
  created_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, waba_id)
);

-- The WABA's phone numbers as Graph last listed them. pin: the two-step PIN we registered the number
-- with (sealed), kept so that a new signup of the same number registers it with the same PIN.
CREATE TABLE whatsapp_waba_numbers (
  account_id                bigint      NOT NULL,
  waba_id                   text        COLLATE "C" NOT NULL,
  phone_number_id           text        COLLATE "C" NOT NULL,
  display_phone_number      text,
  verified_name             text,
  status                    text,
  quality_rating            text,
  code_verification_status  text,
  registered                boolean     NOT NULL DEFAULT false,
  pin                       bytea,
  refreshed_at              timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, waba_id, phone_number_id),
  FOREIGN KEY (account_id, waba_id) REFERENCES whatsapp_wabas (account_id, waba_id) ON DELETE CASCADE
);

-- The WABA's message templates as Graph last listed them (all statuses; `components` verbatim).
CREATE TABLE whatsapp_waba_templates (
  account_id        bigint      NOT NULL,
  waba_id           text        COLLATE "C" NOT NULL,
  template_id       text        COLLATE "C" NOT NULL,
  name              text        NOT NULL,
  language          text        NOT NULL,
  status            text,
  category          text,
  parameter_format  text,
  components        jsonb       NOT NULL DEFAULT '[]',
  refreshed_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, waba_id, template_id),
  FOREIGN KEY (account_id, waba_id) REFERENCES whatsapp_wabas (account_id, waba_id) ON DELETE CASCADE
);
