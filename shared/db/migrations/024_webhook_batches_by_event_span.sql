-- The message lookup (GET /v2/messages/{id}) says where each event's webhook went: which batch
-- holds the event (lookup/webhooks.ts). Until now it found the batch by reading every batch
-- created in a 35 s window around the event (a binary search of the primary key on created_at,
-- then each batch's event_ids compared): 6-10 ms of Postgres per 10-recipient lookup at the
-- benchmark's rate (pg-limits), growing with the batch rate.
--
-- A batch's event ids are written ascending (the relay sorts a pass's events by id and cuts each
-- group into batches in that order; a partner event's batch holds one id), so the span from its
-- first to its last id contains every id it holds. One GiST entry per batch (of up to 100 events)
-- indexes that span; a lookup probes it for each event id and confirms with `= ANY(event_ids)`.
-- The expression keeps least/greatest so that a batch written out of order can never make an
-- insert fail (its middle ids would only be reported `unknown`). An empty array would span
-- everything and cost every probe a look at it, so new batches may not have one (NOT VALID: rows
-- already there are not scanned for it; the relay never wrote one). Spans of different
-- receivers overlap (each group's batch spans the ids other groups took meanwhile, at most the
-- relay's linger), so an id matches about one batch per receiver active at that moment.
-- Measured in docs/benchmarks.md (pg-limits' lookup and webhook-outcome stages). Migrations run in
-- a transaction, so the index is built without CONCURRENTLY: on a large existing table the relay's
-- inserts wait until it is built.
ALTER TABLE webhook_batches ADD CONSTRAINT webhook_batches_some_events CHECK (cardinality(event_ids) > 0) NOT VALID;
CREATE INDEX IF NOT EXISTS webhook_batches_event_span ON webhook_batches USING gist (
  int8range(least(event_ids[1], event_ids[cardinality(event_ids)]), greatest(event_ids[1], event_ids[cardinality(event_ids)]), '[]'));
