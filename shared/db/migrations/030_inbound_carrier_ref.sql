-- The carrier's id of an inbound message, when it gives one (WhatsApp's wamid). Meta delivers a
-- webhook again until it is answered ("duplicates and reordering happen"): a message it delivers
-- again is stored and reported once (ingestInbound, shared/engine/inbound.ts). Viber gives no such
-- id (docs/viber.md), and SMS inbound has none that is unique.
ALTER TABLE inbound_messages ADD COLUMN IF NOT EXISTS carrier_ref text;
CREATE UNIQUE INDEX IF NOT EXISTS inbound_messages_carrier_ref ON inbound_messages (gateway, carrier_ref) WHERE carrier_ref IS NOT NULL;
