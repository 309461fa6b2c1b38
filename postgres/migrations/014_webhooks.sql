-- An owner's webhook endpoints: where the webhooks worker posts the events
-- of their sessions, which ones, and the secret it signs them with. The
-- previous secret still signs (beside the current one) until
-- previous_secret_until, so a receiver can change secrets without a gap.
CREATE TABLE webhooks (
    id                    uuid        PRIMARY KEY,
    owner_id              uuid        NOT NULL,
    url                   text        NOT NULL,
    description           text        NOT NULL DEFAULT '',
    -- The session event types wanted; empty for every one.
    event_types           text[]      NOT NULL DEFAULT '{}',
    session_id            uuid,
    template_id           uuid,
    enabled               boolean     NOT NULL,
    secret                text        NOT NULL,
    previous_secret       text,
    previous_secret_until timestamptz,
    -- Deliveries failed in a row (each after its last retry); at the
    -- worker's limit the webhook is disabled, saying why.
    consecutive_failures  integer     NOT NULL DEFAULT 0,
    disabled_reason       text,
    disabled_at           timestamptz,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);
CREATE INDEX webhooks_owner ON webhooks (owner_id, created_at);

-- One row per event and webhook: the enqueued delivery, its attempts and
-- its outcome. The worker writes it idempotently (the event id and the
-- webhook are unique together), before it acks the event, and each
-- endpoint's loop sends its rows: a crash anywhere leaves the row to send
-- again, never a lost one. stream_seq is the event's sequence in
-- AGENTS_EVENTS, the order of one session's deliveries to one webhook.
CREATE TABLE webhook_deliveries (
    id               uuid        PRIMARY KEY,
    webhook_id       uuid        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL,
    session_id       uuid,
    stream_seq       bigint      NOT NULL,
    -- The exact bytes that are signed and sent.
    body             text        NOT NULL,
    -- pending, delivered or failed.
    status           text        NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    enqueued_at      timestamptz NOT NULL,
    last_attempt_at  timestamptz,
    last_status_code integer,
    last_latency_ms  integer,
    last_error       text,
    response_excerpt text,
    delivered_at     timestamptz,
    UNIQUE (webhook_id, event_id)
);
-- Each endpoint's loop takes its due deliveries, a session's in order.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_session ON webhook_deliveries (webhook_id, session_id, stream_seq) WHERE status = 'pending';
-- The delivery log, newest first.
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, enqueued_at DESC);
