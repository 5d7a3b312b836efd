-- Identity: users (people from an identity provider, services with keys
-- only), their API keys (only the SHA-256 of a key's secret is kept) and the
-- append-only audit log. Times are unix microseconds (UTC); lists are JSON
-- arrays.

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    issuer        TEXT NOT NULL,
    subject       TEXT NOT NULL,
    email         TEXT NOT NULL,
    display_name  TEXT NOT NULL,
    role          TEXT NOT NULL,
    disabled      INTEGER NOT NULL,
    org_id        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_login_at INTEGER,
    version       INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX users_subject_idx ON users (issuer, subject) WHERE issuer <> '';

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    secret_hash  BLOB NOT NULL,
    scopes       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;

CREATE INDEX api_keys_user_idx ON api_keys (user_id, id);

CREATE TABLE audit (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    actor_id   TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT NOT NULL,
    request_id TEXT NOT NULL,
    detail     BLOB
) STRICT;
