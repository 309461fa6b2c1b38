-- Each user's session pool setting (SessionPoolConfig): how many of the
-- user's sessions may hold a slot at once. A user without a row has the
-- deployment's default (agentbus up --pool-max, AGENTBUS_POOL_MAX).
CREATE TABLE pool_configs (
    owner_id                uuid        PRIMARY KEY,
    max_concurrent_sessions integer     NOT NULL CHECK (max_concurrent_sessions >= 1),
    updated_at              timestamptz NOT NULL
);
