-- Run snapshots, observational memory and vector indexes.

ALTER TABLE threads ADD COLUMN observed_up_to_seq BIGINT;

CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL,
    thread_id     TEXT,
    resource_id   TEXT,
    status        TEXT NOT NULL,
    snapshot      JSONB NOT NULL,
    parent_run_id TEXT,
    -- Optimistic concurrency: every save is a compare-and-set on it.
    version       BIGINT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

CREATE INDEX runs_by_created ON runs (created_at DESC, run_id DESC);
CREATE INDEX runs_by_status ON runs (status, created_at DESC);
CREATE INDEX runs_by_thread ON runs (thread_id, created_at DESC);
CREATE INDEX runs_by_resource ON runs (resource_id, created_at DESC);
CREATE INDEX runs_by_agent ON runs (agent_id, created_at DESC);
CREATE INDEX runs_by_parent ON runs (parent_run_id, created_at DESC);

-- Thread scope: thread_id set (deleted with the thread). Resource scope: thread_id NULL.
CREATE TABLE observations (
    ord                BIGSERIAL PRIMARY KEY,
    id                 TEXT NOT NULL UNIQUE,
    thread_id          TEXT REFERENCES threads (id) ON DELETE CASCADE,
    resource_id        TEXT NOT NULL,
    text               TEXT NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    observed_up_to_seq BIGINT,
    source_thread_id   TEXT
);

CREATE INDEX observations_by_thread ON observations (thread_id, ord);
CREATE INDEX observations_by_resource ON observations (resource_id, ord) WHERE thread_id IS NULL;

CREATE TABLE vector_indexes (
    name       TEXT PRIMARY KEY,
    dimension  INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- embedding: the f32 values, little-endian (the exact scan decodes them in Rust, so results
-- equal SQLite's). A pgvector column can be added by a later migration when the extension
-- exists; see `PostgresStorage::has_pgvector`.
CREATE TABLE vectors (
    index_name  TEXT NOT NULL REFERENCES vector_indexes (name) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    embedding   BYTEA NOT NULL,
    metadata    JSONB NOT NULL,
    thread_id   TEXT,
    resource_id TEXT,
    message_id  TEXT,
    PRIMARY KEY (index_name, id)
);

CREATE INDEX vectors_by_thread ON vectors (thread_id);
CREATE INDEX vectors_by_resource ON vectors (index_name, resource_id);
CREATE INDEX vectors_by_message ON vectors (message_id);
