-- Idempotency keys of the HTTP API: the first response to a command sent
-- with an Idempotency-Key header, so that a repeat of the same request (same
-- caller, method, path and key) gets that response again and changes nothing.
CREATE TABLE idempotency_keys (
    -- The caller: user:<owner id> for a person, agent:<session id> for an agent.
    scope        text        NOT NULL,
    method       text        NOT NULL,
    path         text        NOT NULL,
    key          text        NOT NULL,
    -- SHA-256 of the request body: the same key with another body is refused.
    request_hash bytea       NOT NULL,
    -- NULL while the first request is still running.
    status       integer,
    headers      jsonb,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- A running request holds the key until then; after it, a repeat may
    -- take the key over (the process that held it died).
    locked_until timestamptz NOT NULL,
    -- After it the key is forgotten and may be used again.
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (scope, method, path, key)
);

CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
