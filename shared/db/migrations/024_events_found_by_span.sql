-- The message lookup (GET /v2/messages/{id}) says where each event's webhook went: which batch
-- holds the event, or that it still waits in the outbox (lookup/webhooks.ts). Until now it found
-- the batch by reading every batch created in a 35 s window around the event (a binary search of
-- the primary key on created_at, then each batch's event_ids compared): 6-10 ms of Postgres per
-- 10-recipient lookup at the benchmark's rate (pg-limits), growing with the batch rate. And it
-- read the whole outbox, which a relay that is down lets grow: 104 ms a lookup with 20,000 rows
-- waiting.
--
-- A batch's event ids are written ascending (the relay sorts a pass's events by id and cuts each
-- group into batches in that order; a partner event's batch holds one id), and so are an outbox
-- row's (the engine aggregates them in order; the relay's leftovers are sorted). So the span from
-- the first to the last id of either contains every id it holds. One GiST entry per batch (of up
-- to 100 events) and per outbox row (one per statement that wrote events) indexes that span; a
-- lookup probes it for each event id and confirms with `= ANY(event_ids)`.
--
-- The expression keeps least/greatest so that ids written out of order can never make an insert
-- fail (the ids in the middle would only be reported `unknown`). An empty array would span every
-- id and cost every probe a look at it, so new rows may not have one (NOT VALID: rows already
-- there are not scanned for it; nothing ever wrote one). Spans of different receivers overlap
-- (each group's batch spans the ids other groups took meanwhile, at most the relay's linger), so
-- an id matches about one batch per receiver active at that moment.
--
-- Measured in docs/benchmarks.md (pg-limits' lookup, relay and webhook-outcome stages). Migrations
-- run in a transaction, so the indexes are built without CONCURRENTLY: on a large existing table
-- the relay's inserts wait until they are built.
ALTER TABLE webhook_batches ADD CONSTRAINT webhook_batches_some_events CHECK (cardinality(event_ids) > 0) NOT VALID;
ALTER TABLE outbox ADD CONSTRAINT outbox_some_events CHECK (cardinality(event_ids) > 0) NOT VALID;
CREATE INDEX IF NOT EXISTS webhook_batches_event_span ON webhook_batches USING gist (
  int8range(least(event_ids[1], event_ids[cardinality(event_ids)]), greatest(event_ids[1], event_ids[cardinality(event_ids)]), '[]'));
CREATE INDEX IF NOT EXISTS outbox_event_span ON outbox USING gist (
  int8range(least(event_ids[1], event_ids[cardinality(event_ids)]), greatest(event_ids[1], event_ids[cardinality(event_ids)]), '[]'));
