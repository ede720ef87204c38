-- Workflow runs: each run's latest snapshot (JSON), with the columns runs are found by.
CREATE TABLE workflow_runs (
    workflow_id TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    resource_id TEXT,
    status      TEXT NOT NULL,
    snapshot    TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, run_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX workflow_runs_by_created ON workflow_runs (workflow_id, created_at DESC, run_id DESC);
CREATE INDEX workflow_runs_by_status ON workflow_runs (status, created_at DESC);
CREATE INDEX workflow_runs_by_resource ON workflow_runs (resource_id, created_at DESC);
