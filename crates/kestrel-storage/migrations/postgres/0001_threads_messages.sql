-- Threads, their messages, and resource working memory. Runs in the schema named by
-- `PgOptions::schema` (the connection's search_path).

CREATE TABLE threads (
    id             TEXT PRIMARY KEY,
    resource_id    TEXT NOT NULL,
    title          TEXT,
    metadata       JSONB NOT NULL DEFAULT '{}',
    created_at     TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    -- The seq the next appended message gets; bumped under the thread's row lock.
    next_seq       BIGINT NOT NULL DEFAULT 1,
    working_memory TEXT
);

CREATE INDEX threads_by_resource_created ON threads (resource_id, created_at, id);
CREATE INDEX threads_by_resource_updated ON threads (resource_id, updated_at, id);
CREATE INDEX threads_by_created ON threads (created_at, id);
CREATE INDEX threads_by_updated ON threads (updated_at, id);
-- Serves the containment pre-check of metadata filters.
CREATE INDEX threads_by_metadata ON threads USING GIN (metadata jsonb_path_ops);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    thread_id   TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    resource_id TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    role        TEXT NOT NULL,
    parts       JSONB NOT NULL,
    status      TEXT NOT NULL DEFAULT 'complete',
    metadata    JSONB NOT NULL DEFAULT '{}',
    -- The text parts, joined by newlines and lowercased (Unicode), for `search_messages`.
    search_text TEXT NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (thread_id, seq)
);

CREATE INDEX messages_by_resource_created
    ON messages (resource_id, created_at DESC, thread_id, seq DESC);

CREATE TABLE resources (
    id             TEXT PRIMARY KEY,
    working_memory TEXT,
    updated_at     TIMESTAMPTZ NOT NULL
);
