-- The agent platform: agents, their sessions, the sessions' inputs, durable
-- gap-free log streams with a fencing lease, and the programs' native
-- conversation state. Profiles gain the version that conditional puts
-- compare. JSON documents are bytea, kept byte for byte; a nil list is NULL.

ALTER TABLE profiles ADD COLUMN version bigint NOT NULL DEFAULT 1;

CREATE TABLE agents (
    id              text COLLATE "C" PRIMARY KEY,
    name            text NOT NULL,
    engine_kind     text NOT NULL,
    runtime_profile text NOT NULL,
    model           text NOT NULL,
    instructions    text NOT NULL,
    permission_mode text NOT NULL,
    tools           text[],
    vault_ids       text[],
    version         bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE TABLE sessions (
    id                  text COLLATE "C" PRIMARY KEY,
    agent_id            text COLLATE "C" NOT NULL,
    engine_kind         text NOT NULL,
    state               text NOT NULL,
    title               text NOT NULL,
    current_turn_id     text NOT NULL,
    pending_interaction bytea,
    sandbox_id          text NOT NULL,
    runtime             bytea,
    native_key          text NOT NULL,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    last_active_at      timestamptz NOT NULL,
    version             bigint NOT NULL
);

CREATE INDEX sessions_agent_idx ON sessions (agent_id, id);

CREATE TABLE inputs (
    id                text COLLATE "C" PRIMARY KEY,
    session_id        text COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id           text NOT NULL,
    client_message_id text NOT NULL,
    content           text NOT NULL,
    seq               bigint NOT NULL,
    state             text NOT NULL,
    error             text NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);

CREATE UNIQUE INDEX inputs_client_message_idx ON inputs (session_id, client_message_id)
    WHERE client_message_id <> '';
CREATE INDEX inputs_session_seq_idx ON inputs (session_id, seq);

-- next_seq is the seq the stream's next entry gets (1 when empty) and
-- max_source the largest source of its entries; the lease is free when
-- lease_holder is ''.
CREATE TABLE streams (
    id               text COLLATE "C" PRIMARY KEY,
    next_seq         bigint NOT NULL,
    max_source       bigint NOT NULL DEFAULT 0,
    lease_holder     text NOT NULL DEFAULT '',
    lease_epoch      bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz
);

CREATE TABLE stream_entries (
    stream     text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    type       text NOT NULL,
    turn_id    text NOT NULL,
    input_id   text NOT NULL,
    message_id text NOT NULL,
    payload    bytea,
    source     bigint NOT NULL,
    at         timestamptz NOT NULL,
    PRIMARY KEY (stream, seq)
);

-- A native state is kept as the chunks its appends added: chunk start
-- begins at that byte offset, and size is the sum of their lengths.
CREATE TABLE native_states (
    session_id text COLLATE "C" PRIMARY KEY,
    size       bigint NOT NULL
);

CREATE TABLE native_state_chunks (
    session_id text COLLATE "C" NOT NULL,
    start      bigint NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (session_id, start)
);
