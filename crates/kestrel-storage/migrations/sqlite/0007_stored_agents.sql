-- Agents whose definition is stored, and its versions (deleted with the agent).
CREATE TABLE stored_agents (
    id                TEXT PRIMARY KEY NOT NULL,
    active_version_id TEXT,
    metadata          TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE TABLE agent_versions (
    id             TEXT PRIMARY KEY NOT NULL,
    agent_id       TEXT NOT NULL REFERENCES stored_agents (id) ON DELETE CASCADE,
    version_number INTEGER NOT NULL,
    config         TEXT NOT NULL,
    changed_fields TEXT NOT NULL,
    change_message TEXT,
    created_at     INTEGER NOT NULL,
    UNIQUE (agent_id, version_number)
) STRICT;
