-- Execution history of the Shipyard-compatible API (api/shipyard): one row
-- per shell command or python cell run, with the notes a client adds later.
-- A sandbox's history goes with its record.

CREATE TABLE executions (
    seq               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                text COLLATE "C" NOT NULL UNIQUE,
    sandbox_id        text COLLATE "C" NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    exec_type         text NOT NULL,
    code              text NOT NULL,
    success           boolean NOT NULL,
    execution_time_ms bigint NOT NULL,
    output            text NOT NULL,
    error             text,
    description       text,
    tags              text,
    notes             text,
    created_at        timestamptz NOT NULL
);

CREATE INDEX executions_sandbox_seq_idx ON executions (sandbox_id, seq);
