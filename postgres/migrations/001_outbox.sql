-- The transactional outbox: an aggregate's raised events are written here in
-- the same transaction as the aggregate itself; the outbox publisher puts them
-- on AGENTS_EVENTS with Nats-Msg-Id = id, in position order.
CREATE TABLE outbox (
    position     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The writing transaction's id: the publisher reads only rows whose
    -- transaction is older than every transaction still running
    -- (pg_snapshot_xmin), so a row committed late is never skipped.
    txid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    id           uuid        NOT NULL UNIQUE,
    subject      text        NOT NULL,
    aggregate    text        NOT NULL,
    aggregate_id uuid        NOT NULL,
    type         text        NOT NULL,
    payload      jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- A row is deleted once JetStream has acknowledged it: the table holds only
-- what is still to be published, and AGENTS_EVENTS keeps the history.

-- Every consumer is idempotent by message id: a handled message is recorded
-- here, with its result, in the same transaction as its effect.
CREATE TABLE processed_messages (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    result       json,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);

-- Wake the outbox publisher as soon as a transaction with events commits
-- (NOTIFY is delivered at commit); it also polls, in case a wake-up is missed.
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox', '');
    RETURN NULL;
END $$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
