-- The sandbox's outcomes outlive a restart (issue 22): a carried message stays `pending` until the
-- last report of its scripted outcome (D10) was applied. A process that starts, and every sandbox
-- every 30 s, replays the script of pending messages whose reports are overdue; the state path
-- makes a report applied twice a no-op.
ALTER TABLE sandbox_messages ADD COLUMN pending boolean NOT NULL DEFAULT false;
CREATE INDEX sandbox_messages_pending ON sandbox_messages (created_at) WHERE pending;
