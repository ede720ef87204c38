-- Datasets and experiments. A dataset's items change in versions: each change is one new
-- version, and every content of every item is a row of its own (a deletion too, with no
-- record), so any version reads back as it was. Records are JSON text in `record`; the
-- columns beside it are what lookups and listings use. Times are Unix milliseconds.
CREATE TABLE datasets (
    id         TEXT PRIMARY KEY,
    version    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    record     TEXT NOT NULL
);

CREATE INDEX datasets_by_time ON datasets (created_at, id);

CREATE TABLE dataset_items (
    dataset_id TEXT NOT NULL,
    item_id    TEXT NOT NULL,
    version    BIGINT NOT NULL,
    deleted    BOOLEAN NOT NULL,
    record     TEXT,
    PRIMARY KEY (dataset_id, item_id, version)
);

CREATE TABLE experiments (
    id         TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    record     TEXT NOT NULL
);

CREATE INDEX experiments_by_dataset ON experiments (dataset_id, created_at);
CREATE INDEX experiments_by_time ON experiments (created_at, id);

CREATE TABLE experiment_results (
    id            TEXT PRIMARY KEY,
    experiment_id TEXT NOT NULL,
    item_id       TEXT NOT NULL,
    record        TEXT NOT NULL
);

CREATE INDEX experiment_results_by_experiment ON experiment_results (experiment_id, item_id);
