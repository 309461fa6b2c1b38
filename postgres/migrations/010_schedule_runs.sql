-- How far the scheduler got with each scheduled template: every due time up
-- to and including handled_through was started or skipped. It lets a
-- scheduler that comes back know which due times it missed; copies of the
-- scheduler only ever move it forward.
CREATE TABLE schedule_runs (
    template_id     uuid        PRIMARY KEY REFERENCES templates (id) ON DELETE CASCADE,
    handled_through timestamptz NOT NULL
);
