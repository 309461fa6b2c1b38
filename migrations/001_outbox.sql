-- The transactional outbox: an aggregate's raised events are written here in
-- the same transaction as the aggregate itself; the outbox publisher puts them
-- on AGENTS_EVENTS with Nats-Msg-Id = id.
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
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);

CREATE INDEX outbox_unpublished ON outbox (txid, position) WHERE published_at IS NULL;

-- Every consumer is idempotent by message id: a handled message is recorded
-- here, with its result, in the same transaction as its effect.
CREATE TABLE processed_messages (
    consumer     text        NOT NULL,
    message_id   text        NOT NULL,
    result       jsonb,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
