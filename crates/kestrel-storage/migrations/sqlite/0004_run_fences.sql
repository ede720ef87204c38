-- Fencing of runs shared between instances: the lease token each snapshot was saved under,
-- and per run the greatest token any write (snapshot or message) carried. A write with a
-- smaller token is refused.
ALTER TABLE runs ADD COLUMN lease_token INTEGER;

CREATE TABLE run_fences (
    run_id TEXT PRIMARY KEY NOT NULL,
    token INTEGER NOT NULL
) WITHOUT ROWID;
