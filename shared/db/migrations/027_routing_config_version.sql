-- A version of what dispatch routes and prices by: carrier connections, their routes, senders and
-- prices. Every statement that writes one of those tables bumps it in the writer's own transaction
-- (a statement trigger, so no writer can forget: the admin API, onboarding, the start-up sealing of
-- older secrets). Dispatch reads it with each batch; a process whose routes or price copy are
-- older reloads them before it plans the batch (shared/engine/routing.ts, `catchUp`), so a change
-- applies to every message accepted after the admin API answered, in every process, not only
-- after the next periodic refresh. A statement that changed no row bumps it too: one needless
-- reload, never a missed one.
CREATE TABLE IF NOT EXISTS routing_config (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint  NOT NULL
);
INSERT INTO routing_config (only_row, version) VALUES (true, 1) ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION bump_routing_config() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE routing_config SET version = version + 1;
  RETURN NULL;
END
$$;

-- The tables dispatch routes and prices by, each with the same statement trigger.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['carrier_connections', 'carrier_routes', 'carrier_senders', 'prices'] LOOP
    EXECUTE format('DROP TRIGGER IF EXISTS routing_config_bump ON %I', t);
    EXECUTE format('CREATE TRIGGER routing_config_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION bump_routing_config()', t);
  END LOOP;
END
$$;
