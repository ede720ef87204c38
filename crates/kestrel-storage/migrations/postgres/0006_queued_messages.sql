-- Messages queued for a thread's next runs, in order (deleted with the thread).
CREATE TABLE queued_messages (
    seq         BIGSERIAL PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    run_id      TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    thread_id   TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    resource_id TEXT NOT NULL,
    message     JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX queued_messages_by_thread ON queued_messages (thread_id, seq);
