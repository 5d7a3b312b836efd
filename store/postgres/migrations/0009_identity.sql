-- Identity: users (people from an identity provider, services with keys
-- only), their API keys (only the SHA-256 of a key's secret is kept) and the
-- append-only audit log.

CREATE TABLE users (
    id            text COLLATE "C" PRIMARY KEY,
    kind          text NOT NULL,
    issuer        text NOT NULL,
    subject       text NOT NULL,
    email         text NOT NULL,
    display_name  text NOT NULL,
    role          text NOT NULL,
    disabled      boolean NOT NULL,
    org_id        text NOT NULL,
    created_at    timestamptz NOT NULL,
    last_login_at timestamptz,
    version       bigint NOT NULL
);

CREATE UNIQUE INDEX users_subject_idx ON users (issuer, subject) WHERE issuer <> '';

CREATE TABLE api_keys (
    id           text COLLATE "C" PRIMARY KEY,
    user_id      text COLLATE "C" NOT NULL,
    name         text NOT NULL,
    secret_hash  bytea NOT NULL,
    scopes       text[] NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX api_keys_user_idx ON api_keys (user_id, id);

CREATE TABLE audit (
    seq        bigserial PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor_id   text NOT NULL,
    action     text NOT NULL,
    target     text NOT NULL,
    request_id text NOT NULL,
    detail     bytea
);
