-- A recipient's state lives on its attempts only. Until now the recipient row repeated its
-- current attempt's state, text, sender, parts and times, and was rewritten with it three times
-- per recipient (dispatch, sent, delivered), each time a new version of a wide row (and a lock of
-- it in every status batch). Now the recipient row is written once at acceptance and changes only
-- when its flow moves to another step (`step`, `due_at`); what the REST API shows is read from the
-- attempt at the recipient's current step (see the `recipient_states` view).
--
-- A dispatch is guarded by the attempts' unique (recipient_id, step) instead of the recipient's
-- state: a job that runs twice finds its attempts there (INSERT … ON CONFLICT DO NOTHING). Work
-- that may have lost its job stays findable until its attempts were handed to a carrier: a step
-- due at acceptance through its message's `dispatch_pending` flag, any other step through the
-- recipient's `due_at`; both are now cleared after the hand-over, not when the attempt is written,
-- so the index of unhanded attempts (whose predicate made every attempt's first report a non-HOT
-- update) is no longer needed.
--
-- Measured with `npm run bench` (docs/benchmarks.md).

ALTER TABLE attempts
  ADD COLUMN body         text,         -- text sent, when it is not the message's own body (channel body, transliterated, masked code)
  ADD COLUMN sent_at      timestamptz,  -- carrier time the attempt reached `sent`
  ADD COLUMN delivered_at timestamptz;  -- carrier time the attempt reached `delivered`

-- What the recipient rows held moves to the attempt at their current step.
UPDATE attempts a
   SET body = CASE WHEN r.body IS DISTINCT FROM m.body THEN r.body END,
       sent_at = r.ts_sent,
       delivered_at = r.ts_delivered
  FROM recipients r JOIN messages m ON m.id = r.message_id
 WHERE a.recipient_id = r.id AND a.step = r.step
   AND (r.body IS DISTINCT FROM m.body OR r.ts_sent IS NOT NULL OR r.ts_delivered IS NOT NULL);

-- `state` of a recipient row now says only how it was accepted: 'queued' (to be sent) or 'test'
-- (the test number, never sent). Rows written before keep their last state, which their current
-- attempt also holds.
ALTER TABLE recipients
  DROP COLUMN flow_taken,
  DROP COLUMN body,
  DROP COLUMN sender,
  DROP COLUMN parts,
  DROP COLUMN ts_sent,
  DROP COLUMN ts_delivered,
  DROP COLUMN updated_at;
-- Rarely updated now: pack new pages (fillfactor 30 left room for three updates per row).
ALTER TABLE recipients SET (fillfactor = 90);

DROP INDEX IF EXISTS attempts_unhanded;

-- A recipient as the APIs see it: its current step's attempt (none yet: queued or test).
CREATE VIEW recipient_states AS
SELECT r.id, r.public_id, r.message_id, r.idx, r.account_id, r.key_id, r.tag, r.raw_phone, r.phone, r.step, r.due_at, r.created_at,
       COALESCE(a.state, r.state) AS state, a.id AS attempt_id, a.channel, a.result_info
  FROM recipients r
  LEFT JOIN attempts a ON a.recipient_id = r.id AND a.step = r.step;
