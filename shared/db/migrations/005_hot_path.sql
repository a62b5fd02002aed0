-- Hot-path schema changes measured with `npm run bench` (docs/benchmarks.md, issue 9).

-- Receipts look refs up by (carrier, ref) for a batch: `carrier = ANY(..) AND ref = ANY(..)`. With
-- the carrier first (one carrier holds nearly every row) the planner walked every ref of that
-- carrier per batch; with the ref first the lookup reads only the refs asked for.
ALTER TABLE carrier_refs DROP CONSTRAINT carrier_refs_pkey;
ALTER TABLE carrier_refs ADD PRIMARY KEY (ref, carrier);
DROP INDEX pending_receipts_ref;
CREATE INDEX pending_receipts_ref ON pending_receipts (ref, carrier);

-- HOT updates: an UPDATE that changes no indexed column (predicates included) and finds room on
-- its page writes no index entries. Status changes of recipients and attempts touch only `state`
-- and a few unindexed columns, so the partial indexes no longer name `state`, and the busiest
-- tables leave room on their pages.
DROP INDEX recipients_due;
CREATE INDEX recipients_due ON recipients (due_at) WHERE due_at IS NOT NULL;
-- handed_at: when the attempt no longer waits to be handed to a carrier (handed over, refused
-- before leaving, or moved on by a carrier report).
UPDATE attempts SET handed_at = COALESCE(updated_at, now()) WHERE handed_at IS NULL AND state <> 'sending';
DROP INDEX attempts_unhanded;
CREATE INDEX attempts_unhanded ON attempts (created_at) WHERE handed_at IS NULL;
ALTER TABLE recipients SET (fillfactor = 70);
ALTER TABLE attempts SET (fillfactor = 70);
ALTER TABLE carrier_refs SET (fillfactor = 80);

-- The webhook outbox as its own narrow table: events are written once and never updated; the
-- relay deletes the outbox row of each event it puts into a batch (an UPDATE of the wide event
-- row wrote a new copy of it and an entry in every index).
CREATE TABLE outbox (
  event_id bigint PRIMARY KEY
);
INSERT INTO outbox (event_id) SELECT id FROM events WHERE batch_id IS NULL AND callback_url IS NOT NULL;
DROP INDEX events_unrelayed;
ALTER TABLE events DROP COLUMN batch_id;
