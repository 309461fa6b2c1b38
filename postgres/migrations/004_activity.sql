-- The activity stream of each session: one row per raw sidecar event, in
-- the order the relay stored them on AGENTS_SIDECAR_EVENTS. source_seq is
-- that stream sequence: it orders the rows, serves as the cursor of the
-- activity query, and makes the projection idempotent (a redelivered raw
-- event inserts nothing).
CREATE TABLE activity_items (
    id           uuid        PRIMARY KEY,
    session_id   uuid        NOT NULL,
    source_seq   bigint      NOT NULL UNIQUE,
    raw_type     text        NOT NULL,
    type         text        NOT NULL,
    summary      text        NOT NULL,
    detail       text        NOT NULL DEFAULT '',
    tool_name    text        NOT NULL DEFAULT '',
    subagent_id  text,
    -- The engine's id of the tool call an item starts or ends.
    tool_use_id  text,
    occurred_at  timestamptz NOT NULL
);
CREATE INDEX activity_items_session ON activity_items (session_id, source_seq);
CREATE INDEX activity_items_tool_use ON activity_items (session_id, tool_use_id) WHERE tool_use_id IS NOT NULL;
