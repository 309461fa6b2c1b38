-- The commands worker wakes the outbox publisher after each commit instead
-- (postgres.NotifyOutbox): a NOTIFY inside the writing transaction holds the
-- notification queue's lock until that transaction's commit is flushed, so
-- every writer's commit waited for the one before it.
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();

