-- Live scorings sampled but not yet stored: kept so a process that stops between a run's end
-- and its scores does not lose them. A row goes in the transaction that stores its score.
-- The whole pending scoring is JSON text in `record`; `created_at` is Unix milliseconds.
CREATE TABLE pending_scores (
    id         TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    record     TEXT NOT NULL
);

CREATE INDEX pending_scores_by_time ON pending_scores (created_at, id);
