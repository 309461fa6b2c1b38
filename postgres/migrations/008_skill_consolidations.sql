-- Consolidation sessions (StartSkillConsolidationCommand): the skill and the
-- memory pills each one folds in, for the reaction that consolidates the
-- skill once the session's output is approved.
CREATE TABLE skill_consolidations (
    session_id uuid        PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    skill_id   uuid        NOT NULL,
    pill_ids   uuid[]      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
