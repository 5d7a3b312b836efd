-- The first schema of the AstraBox store. Keys use the "C" collation so that
-- ordering is byte-wise, as in the SQLite store; durations are nanoseconds.

CREATE TABLE sandboxes (
    id             text COLLATE "C" PRIMARY KEY,
    backend        text NOT NULL,
    profile        text NOT NULL,
    state          text NOT NULL,
    reason         text NOT NULL,
    image          text NOT NULL,
    spec           bytea,
    metadata       jsonb NOT NULL DEFAULT '{}',
    entrypoint     text[],
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    expires_at     timestamptz,
    idle_timeout   bigint NOT NULL,
    last_active_at timestamptz NOT NULL,
    provider_state bytea,
    version        bigint NOT NULL
);

CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
CREATE INDEX sandboxes_backend_state_idx ON sandboxes (backend, state);
CREATE INDEX sandboxes_expires_idx ON sandboxes (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX sandboxes_metadata_idx ON sandboxes USING gin (metadata jsonb_path_ops);

CREATE TABLE events (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sandbox_id text COLLATE "C" NOT NULL,
    state      text NOT NULL,
    reason     text NOT NULL,
    at         timestamptz NOT NULL
);

CREATE INDEX events_sandbox_seq_idx ON events (sandbox_id, seq);

CREATE TABLE idempotency (
    key          text COLLATE "C" PRIMARY KEY,
    request_hash text NOT NULL,
    status       integer NOT NULL,
    body         bytea,
    created_at   timestamptz NOT NULL
);

CREATE INDEX idempotency_created_idx ON idempotency (created_at);

CREATE TABLE profiles (
    name       text COLLATE "C" PRIMARY KEY,
    data       bytea,
    updated_at timestamptz NOT NULL
);
