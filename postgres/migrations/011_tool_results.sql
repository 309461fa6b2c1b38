-- The first result of each tool call, as the transcript projection saw it.
-- A session's raw events may be projected out of stream order (a worker
-- killed with events in flight gets them redelivered after its successor
-- went on), so a result may arrive before its call: it waits here, and the
-- call takes it when it is recorded. The earliest result in the stream
-- wins, whatever the order they were projected in.
CREATE TABLE tool_results (
    session_id   uuid        NOT NULL,
    tool_use_id  text        NOT NULL,
    source_seq   bigint      NOT NULL,
    status       text        NOT NULL,
    result       text        NOT NULL,
    is_error     boolean     NOT NULL,
    completed_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, tool_use_id)
);
