-- Idempotent sends (issue 27). One row per `Idempotency-Key` header (kind 0) and per message
-- object's `idempotency_key` (kind 1), per API key, kept 24 hours. A row is written in the
-- transaction of the accept it belongs to, so an accepted call and its key commit together; a
-- second request with the same key waits on this primary key until the first commits, then finds
-- the row (and answers it again) instead of sending twice.
-- `fingerprint`: SHA-256 of what the key was used for (endpoint and body bytes; or mode and object).
-- `response`: the call's answer (request_id, accepted, rejected), or an object's ids.
-- Calls without a key never touch this table.
CREATE TABLE idempotency_keys (
  key_id      bigint      NOT NULL,
  kind        smallint    NOT NULL,
  idem_key    text        COLLATE "C" NOT NULL,
  fingerprint bytea       NOT NULL,
  response    jsonb       NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (key_id, kind, idem_key)
);
-- Expired rows are deleted by the sweep in created_at order (a row past 24 h is also replaced in
-- place when its key is used again, so the sweep's pace never changes what a client sees).
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
