-- The agent API key of a session's current sidecar, beside the key given
-- to whoever started the session. Both authenticate as the session.
ALTER TABLE sessions ADD COLUMN sidecar_key_hash text UNIQUE;
