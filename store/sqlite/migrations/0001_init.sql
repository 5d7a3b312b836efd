-- The first schema of the AstraBox store. Times are unix microseconds (UTC),
-- durations nanoseconds; metadata is a JSON object kept for reading, mirrored
-- row by row into sandbox_metadata for filtering.

CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    backend        TEXT NOT NULL,
    profile        TEXT NOT NULL,
    state          TEXT NOT NULL,
    reason         TEXT NOT NULL,
    image          TEXT NOT NULL,
    spec           BLOB,
    metadata       TEXT NOT NULL,
    entrypoint     TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    expires_at     INTEGER,
    idle_timeout   INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL,
    provider_state BLOB,
    version        INTEGER NOT NULL
) STRICT;

CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
CREATE INDEX sandboxes_backend_state_idx ON sandboxes (backend, state);
CREATE INDEX sandboxes_expires_idx ON sandboxes (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE sandbox_metadata (
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX sandbox_metadata_pair_idx ON sandbox_metadata (key, value);

-- AUTOINCREMENT: a seq is never reused, even after the newest event is deleted.
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id TEXT NOT NULL,
    state      TEXT NOT NULL,
    reason     TEXT NOT NULL,
    at         INTEGER NOT NULL
) STRICT;

CREATE INDEX events_sandbox_seq_idx ON events (sandbox_id, seq);

CREATE TABLE idempotency (
    key          TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL,
    body         BLOB,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX idempotency_created_idx ON idempotency (created_at);

CREATE TABLE profiles (
    name       TEXT PRIMARY KEY,
    data       BLOB,
    updated_at INTEGER NOT NULL
) STRICT;
