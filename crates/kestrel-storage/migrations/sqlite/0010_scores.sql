-- Scores of scorers (Mastra's `mastra_scorers` rows), one per scorer run, upserted by id. The
-- whole record is JSON text in `record`; the columns beside it are what listings filter and
-- order by. `created_at` is Unix milliseconds.
CREATE TABLE scores (
    id            TEXT PRIMARY KEY,
    scorer_id     TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    entity_type   TEXT NOT NULL,
    entity_id     TEXT NOT NULL,
    source        TEXT NOT NULL,
    experiment_id TEXT,
    created_at    INTEGER NOT NULL,
    record        TEXT NOT NULL
) STRICT;

CREATE INDEX scores_by_run ON scores (run_id, created_at);
CREATE INDEX scores_by_scorer ON scores (scorer_id, created_at);
CREATE INDEX scores_by_entity ON scores (entity_type, entity_id, created_at);
CREATE INDEX scores_by_experiment ON scores (experiment_id) WHERE experiment_id IS NOT NULL;
CREATE INDEX scores_by_time ON scores (created_at, id);
