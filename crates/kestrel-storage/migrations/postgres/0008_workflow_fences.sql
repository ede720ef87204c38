-- Fencing of workflow runs shared between instances: per run, the greatest lease token any
-- of its writes carried (raised by the instance that takes the run over, before it reads it).
-- A save with a smaller token is refused. Kept when the run is deleted.
CREATE TABLE workflow_fences (
    workflow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (workflow_id, run_id)
);
