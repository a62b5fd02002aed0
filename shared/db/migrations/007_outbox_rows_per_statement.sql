-- One outbox row per statement that wrote events (their ids in an array), not one per event: a
-- status batch of hundreds of reports adds one row, and the relay deletes one. Measured with
-- `npm run bench` (docs/benchmarks.md): the per-event insert and delete were a third of the rows
-- Postgres wrote per recipient.
ALTER TABLE outbox RENAME TO outbox_per_event;
CREATE TABLE outbox (
  id        bigserial PRIMARY KEY,
  event_ids bigint[] NOT NULL
);
-- Events still waiting, in rows of at most 1000 ids (a relay pass reads a few rows at a time).
INSERT INTO outbox (event_ids)
SELECT array_agg(event_id ORDER BY event_id) FROM outbox_per_event GROUP BY event_id / 1000 ORDER BY min(event_id);
DROP TABLE outbox_per_event;
