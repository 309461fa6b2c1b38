-- The transcript of each session, projected from its raw sidecar events on
-- AGENTS_SIDECAR_EVENTS by the transcript worker: messages, tool calls with
-- their results, subagents, and the log. source_seq is the stream sequence
-- of the raw event a row came from and ids are derived from it (or from the
-- engine's tool_use_id), so a redelivered event or a replay of the stream
-- inserts nothing new and a rebuild writes the very same rows.

-- Text the agent or one of its subagents wrote. A subagent's messages
-- carry its id and are never part of the parent's list.
CREATE TABLE agent_messages (
    id          uuid        PRIMARY KEY,
    session_id  uuid        NOT NULL,
    source_seq  bigint      NOT NULL UNIQUE,
    subagent_id uuid,
    source      text        NOT NULL,
    content     text        NOT NULL,
    model_id    text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL
);
-- Parent messages (subagent_id IS NULL) or one subagent's, in stream order.
CREATE INDEX agent_messages_session ON agent_messages (session_id, subagent_id, source_seq);

-- One row per tool call; its result is attached to it when the tool_result
-- naming its tool_use_id arrives (result_seq records that event).
CREATE TABLE tool_calls (
    id              uuid        PRIMARY KEY,
    session_id      uuid        NOT NULL,
    tool_use_id     text        NOT NULL,
    source_seq      bigint      NOT NULL UNIQUE,
    subagent_id     uuid,
    tool_name       text        NOT NULL,
    input           text        NOT NULL,
    status          text        NOT NULL,
    result          text,
    result_is_error boolean,
    result_seq      bigint,
    started_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    UNIQUE (session_id, tool_use_id)
);
CREATE INDEX tool_calls_session ON tool_calls (session_id, subagent_id, source_seq);

-- The subagents a session's agent spawned (each through a Task tool call,
-- parent_tool_use_id): Running until that call's result arrives, then
-- Completed, or Failed when the result is an error.
CREATE TABLE subagent_sessions (
    session_id         uuid        NOT NULL,
    id                 uuid        NOT NULL,
    engine_subagent_id text        NOT NULL,
    subagent_type      text        NOT NULL DEFAULT '',
    parent_tool_use_id text        NOT NULL DEFAULT '',
    model_id           text        NOT NULL DEFAULT '',
    objective          text        NOT NULL DEFAULT '',
    status             text        NOT NULL,
    failure_reason     text        NOT NULL DEFAULT '',
    source_seq         bigint      NOT NULL,
    started_at         timestamptz NOT NULL,
    completed_at       timestamptz,
    PRIMARY KEY (session_id, id)
);
CREATE INDEX subagent_sessions_session ON subagent_sessions (session_id, source_seq);
CREATE INDEX subagent_sessions_parent_call ON subagent_sessions (session_id, parent_tool_use_id);

-- The session's log, replayed for review: the agent's output, projected
-- from raw events (kind output, source_seq set), and the decisions the
-- agent logs through the agent API (kind decision, keyed by the command
-- id, no source_seq). Only output rows are the projection's: a rebuild
-- deletes and rewrites those and leaves the decisions alone.
CREATE TABLE session_log_chunks (
    id          uuid        PRIMARY KEY,
    session_id  uuid        NOT NULL,
    kind        text        NOT NULL,
    content     text        NOT NULL,
    source_seq  bigint      UNIQUE,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX session_log_chunks_session ON session_log_chunks (session_id, recorded_at, source_seq);
