-- Agents whose definition is stored, and its versions (deleted with the agent).
CREATE TABLE stored_agents (
    id                TEXT PRIMARY KEY,
    active_version_id TEXT,
    metadata          JSONB NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);

CREATE TABLE agent_versions (
    id             TEXT PRIMARY KEY,
    agent_id       TEXT NOT NULL REFERENCES stored_agents (id) ON DELETE CASCADE,
    version_number BIGINT NOT NULL,
    config         JSONB NOT NULL,
    changed_fields JSONB NOT NULL,
    change_message TEXT,
    created_at     TIMESTAMPTZ NOT NULL,
    UNIQUE (agent_id, version_number)
);
