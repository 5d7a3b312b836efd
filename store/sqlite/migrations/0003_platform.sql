-- The agent platform: agents, their sessions, the sessions' inputs, durable
-- gap-free log streams with a fencing lease, and the programs' native
-- conversation state. Profiles gain the version that conditional puts
-- compare. Times are unix microseconds (UTC); lists are JSON arrays, NULL
-- for a nil list.

ALTER TABLE profiles ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

CREATE TABLE agents (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    engine_kind     TEXT NOT NULL,
    runtime_profile TEXT NOT NULL,
    model           TEXT NOT NULL,
    instructions    TEXT NOT NULL,
    permission_mode TEXT NOT NULL,
    tools           TEXT,
    vault_ids       TEXT,
    version         INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY,
    agent_id            TEXT NOT NULL,
    engine_kind         TEXT NOT NULL,
    state               TEXT NOT NULL,
    title               TEXT NOT NULL,
    current_turn_id     TEXT NOT NULL,
    pending_interaction BLOB,
    sandbox_id          TEXT NOT NULL,
    runtime             BLOB,
    native_key          TEXT NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    last_active_at      INTEGER NOT NULL,
    version             INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_agent_idx ON sessions (agent_id, id);

CREATE TABLE inputs (
    id                TEXT PRIMARY KEY,
    session_id        TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id           TEXT NOT NULL,
    client_message_id TEXT NOT NULL,
    content           TEXT NOT NULL,
    seq               INTEGER NOT NULL,
    state             TEXT NOT NULL,
    error             TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX inputs_client_message_idx ON inputs (session_id, client_message_id)
    WHERE client_message_id <> '';
CREATE INDEX inputs_session_seq_idx ON inputs (session_id, seq);

-- next_seq is the seq the stream's next entry gets (1 when empty) and
-- max_source the largest source of its entries; the lease is free when
-- lease_holder is ''.
CREATE TABLE streams (
    id               TEXT PRIMARY KEY,
    next_seq         INTEGER NOT NULL,
    max_source       INTEGER NOT NULL DEFAULT 0,
    lease_holder     TEXT NOT NULL DEFAULT '',
    lease_epoch      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER
) STRICT;

CREATE TABLE stream_entries (
    stream     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    type       TEXT NOT NULL,
    turn_id    TEXT NOT NULL,
    input_id   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    payload    BLOB,
    source     INTEGER NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (stream, seq)
) STRICT, WITHOUT ROWID;

-- A native state is kept as the chunks its appends added: chunk start
-- begins at that byte offset, and size is the sum of their lengths.
CREATE TABLE native_states (
    session_id TEXT PRIMARY KEY,
    size       INTEGER NOT NULL
) STRICT;

CREATE TABLE native_state_chunks (
    session_id TEXT NOT NULL,
    start      INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (session_id, start)
) STRICT;
