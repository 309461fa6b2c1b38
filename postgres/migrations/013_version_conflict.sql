-- A write sent in one batch with its transaction's COMMIT must fail in the
-- server when it may not commit: a check of its result in the client
-- would come after the commit. version_conflict raises what an optimistic
-- update that found its row changed stands for: SQLSTATE AB409, which the
-- repositories read as a version conflict and the commands worker retries.
CREATE FUNCTION version_conflict(aggregate text, id text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% %: changed since it was loaded', aggregate, id USING ERRCODE = 'AB409';
END
$$;
