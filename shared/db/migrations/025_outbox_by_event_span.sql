-- The message lookup finds an event not batched yet in the outbox (lookup/webhooks.ts). It read
-- the whole outbox for it: nothing while the relay keeps up, but a relay that is down lets the
-- outbox grow, and then every lookup read all of it (104-106 ms a lookup with 20,000 rows of 100
-- ids waiting). As for the batches (migration 024), an outbox row's ids ascend (the engine
-- aggregates them in order since this migration's commit; the relay's leftovers were sorted
-- already), so one GiST entry per row (one per statement that wrote events) indexes the span from
-- its first id to its last, and a lookup probes it for each event, confirming with `= ANY`.
-- Rows written unsorted by the code before (in practice already ascending: a statement's ids come
-- from the sequence in insertion order) are relayed within a second or so; until then an id in the
-- middle of one could be reported `unknown`.
--
-- An empty array would span every id, so new rows may not have one (NOT VALID: rows already there
-- are not scanned; nothing ever wrote one). Built inside the migration's transaction, without
-- CONCURRENTLY: on a large outbox, the statements that write events wait until it is built.
-- Measured in docs/benchmarks.md ("Queued events the same way").
ALTER TABLE outbox ADD CONSTRAINT outbox_some_events CHECK (cardinality(event_ids) > 0) NOT VALID;
CREATE INDEX IF NOT EXISTS outbox_event_span ON outbox USING gist (
  int8range(least(event_ids[1], event_ids[cardinality(event_ids)]), greatest(event_ids[1], event_ids[cardinality(event_ids)]), '[]'));
