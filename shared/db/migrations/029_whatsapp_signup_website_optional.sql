-- `wa_website` is an optional prefill of the signup (docs/rest-api.md; the input schema defaults it
-- to null), but migration 017 declared it NOT NULL: a signup without it answered 500.
ALTER TABLE whatsapp_signups ALTER COLUMN wa_website DROP NOT NULL;
