-- A session's message queue keeps only the messages still Pending; a
-- message that was delivered or cancelled leaves the queue's document and
-- is kept here, written in the same transaction as the queue. Enqueueing
-- and delivering then rewrite only what still waits, however long the
-- session's history. doc is the message exactly as the queue held it.
CREATE TABLE message_history (
    message_id uuid   PRIMARY KEY,
    session_id uuid   NOT NULL REFERENCES sessions (id),
    sequence   bigint NOT NULL,
    status     text   NOT NULL,
    doc        jsonb  NOT NULL
);
-- A session's history in order of arrival.
CREATE INDEX message_history_session ON message_history (session_id, sequence);

INSERT INTO message_history (message_id, session_id, sequence, status, doc)
SELECT (m->>'messageId')::uuid, q.session_id, (m->>'sequence')::bigint, m->>'status', m
  FROM message_queues q, jsonb_array_elements(q.doc->'messages') m
 WHERE m->>'status' <> 'Pending';

-- The queue remembers the next sequence number, which it can no longer
-- derive from the messages it holds.
UPDATE message_queues q
   SET doc = jsonb_build_object(
       'messages', COALESCE((SELECT jsonb_agg(m ORDER BY (m->>'sequence')::bigint)
                               FROM jsonb_array_elements(q.doc->'messages') m
                              WHERE m->>'status' = 'Pending'), '[]'::jsonb),
       'nextSequence', COALESCE((SELECT max((m->>'sequence')::bigint) + 1
                                   FROM jsonb_array_elements(q.doc->'messages') m), 0));
