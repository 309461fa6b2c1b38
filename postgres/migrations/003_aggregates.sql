-- The aggregates. Each row holds the aggregate's whole state as a JSON
-- document (doc), written and read only through its repository, plus the
-- columns that queries filter and sort on. version is the optimistic lock:
-- an update names the version it loaded and fails if another committed first.

CREATE TABLE sessions (
    id           uuid        PRIMARY KEY,
    owner_id     uuid        NOT NULL,
    status       text        NOT NULL,
    chain_id     uuid,
    template_id  uuid,
    -- SHA-256 of the session's agent API key, hex: the agent API finds the
    -- session by it.
    api_key_hash text        UNIQUE,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    version      bigint      NOT NULL,
    doc          jsonb       NOT NULL
);
-- Session lists: by owner, optionally by status, newest first.
CREATE INDEX sessions_owner_status_created ON sessions (owner_id, status, created_at DESC);
CREATE INDEX sessions_owner_created ON sessions (owner_id, created_at DESC);
-- The pool starts the oldest Queued session when a slot frees.
CREATE INDEX sessions_status_created ON sessions (status, created_at);
CREATE INDEX sessions_chain ON sessions (chain_id) WHERE chain_id IS NOT NULL;

CREATE TABLE message_queues (
    session_id uuid   PRIMARY KEY REFERENCES sessions (id),
    owner_id   uuid   NOT NULL,
    version    bigint NOT NULL,
    doc        jsonb  NOT NULL
);

CREATE TABLE chains (
    id         uuid        PRIMARY KEY,
    owner_id   uuid        NOT NULL,
    status     text        NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version    bigint      NOT NULL,
    doc        jsonb       NOT NULL
);
CREATE INDEX chains_owner_status_created ON chains (owner_id, status, created_at DESC);

CREATE TABLE skills (
    id         uuid        PRIMARY KEY,
    owner_id   uuid        NOT NULL,
    name       text        NOT NULL,
    is_active  boolean     NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version    bigint      NOT NULL,
    doc        jsonb       NOT NULL
);
CREATE INDEX skills_owner_created ON skills (owner_id, created_at DESC);

CREATE TABLE templates (
    id         uuid        PRIMARY KEY,
    owner_id   uuid        NOT NULL,
    name       text        NOT NULL,
    is_active  boolean     NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version    bigint      NOT NULL,
    doc        jsonb       NOT NULL
);
CREATE INDEX templates_owner_created ON templates (owner_id, created_at DESC);
