-- Execution history of the Shipyard-compatible API (api/shipyard): one row
-- per shell command or python cell run, with the notes a client adds later.
-- A sandbox's history goes with its record. Times are unix microseconds.

-- AUTOINCREMENT: a seq is never reused, so newest-first stays exact.
CREATE TABLE executions (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                TEXT NOT NULL UNIQUE,
    sandbox_id        TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    exec_type         TEXT NOT NULL,
    code              TEXT NOT NULL,
    success           INTEGER NOT NULL,
    execution_time_ms INTEGER NOT NULL,
    output            TEXT NOT NULL,
    error             TEXT,
    description       TEXT,
    tags              TEXT,
    notes             TEXT,
    created_at        INTEGER NOT NULL
) STRICT;

CREATE INDEX executions_sandbox_seq_idx ON executions (sandbox_id, seq);
