-- Threads, their messages, and resource working memory.
-- Timestamps are microseconds since the Unix epoch; JSON columns hold canonical JSON text
-- (compact, object keys sorted) so metadata filters can compare nested values as text.

CREATE TABLE threads (
    id             TEXT PRIMARY KEY NOT NULL,
    resource_id    TEXT NOT NULL,
    title          TEXT,
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- The seq the next appended message gets; bumped inside the append's write transaction.
    next_seq       INTEGER NOT NULL DEFAULT 1,
    working_memory TEXT
) STRICT;

CREATE INDEX threads_by_resource_created ON threads (resource_id, created_at, id);
CREATE INDEX threads_by_resource_updated ON threads (resource_id, updated_at, id);
CREATE INDEX threads_by_created ON threads (created_at, id);
CREATE INDEX threads_by_updated ON threads (updated_at, id);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY NOT NULL,
    thread_id   TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    resource_id TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    role        TEXT NOT NULL,
    parts       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'complete',
    metadata    TEXT NOT NULL DEFAULT '{}',
    -- The text parts, joined by newlines and lowercased (Unicode), for `search_messages`.
    search_text TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    UNIQUE (thread_id, seq)
) STRICT;

CREATE INDEX messages_by_resource_created
    ON messages (resource_id, created_at DESC, thread_id, seq DESC);

CREATE TABLE resources (
    id             TEXT PRIMARY KEY NOT NULL,
    working_memory TEXT,
    updated_at     INTEGER NOT NULL
) STRICT;
