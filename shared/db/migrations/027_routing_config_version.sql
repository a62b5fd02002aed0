-- A version of what dispatch routes and prices by: carrier connections, their routes, senders and
-- prices. Every statement that changes rows of those tables bumps it in the writer's own transaction
-- (a statement trigger, so no writer can forget: the admin API, onboarding, the start-up sealing of
-- older secrets). Dispatch reads it with each batch; a process whose routes or price copy are
-- older reloads them before it plans the batch (shared/engine/routing.ts, `catchUp`), so a change
-- applies to every message accepted after the admin API answered, in every process, not only
-- after the next periodic refresh.
CREATE TABLE IF NOT EXISTS routing_config (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint  NOT NULL
);
INSERT INTO routing_config (only_row, version) VALUES (true, 1) ON CONFLICT DO NOTHING;

-- TRUNCATE has no transition table and always counts. The other events see the rows they changed
-- as `changed` (each trigger below names its transition table so); a statement that changed none
-- (a DELETE that found nothing, as a refused admin call's) leaves the version as it was.
CREATE OR REPLACE FUNCTION bump_routing_config() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE routing_config SET version = version + 1;
  ELSIF EXISTS (SELECT 1 FROM changed) THEN
    UPDATE routing_config SET version = version + 1;
  END IF;
  RETURN NULL;
END
$$;

-- The tables dispatch routes and prices by, each with the same four statement triggers (an
-- upsert fires both the INSERT and the UPDATE one).
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['carrier_connections', 'carrier_routes', 'carrier_senders', 'prices'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS routing_config_insert ON %1$I;
                    CREATE TRIGGER routing_config_insert AFTER INSERT ON %1$I REFERENCING NEW TABLE AS changed
                      FOR EACH STATEMENT EXECUTE FUNCTION bump_routing_config();
                    DROP TRIGGER IF EXISTS routing_config_update ON %1$I;
                    CREATE TRIGGER routing_config_update AFTER UPDATE ON %1$I REFERENCING NEW TABLE AS changed
                      FOR EACH STATEMENT EXECUTE FUNCTION bump_routing_config();
                    DROP TRIGGER IF EXISTS routing_config_delete ON %1$I;
                    CREATE TRIGGER routing_config_delete AFTER DELETE ON %1$I REFERENCING OLD TABLE AS changed
                      FOR EACH STATEMENT EXECUTE FUNCTION bump_routing_config();
                    DROP TRIGGER IF EXISTS routing_config_truncate ON %1$I;
                    CREATE TRIGGER routing_config_truncate AFTER TRUNCATE ON %1$I
                      FOR EACH STATEMENT EXECUTE FUNCTION bump_routing_config()', t);
  END LOOP;
END
$$;
