-- Browsers' signed-in sessions: the SHA-256 of the cookie's value (hex),
-- never the value; one per sign-in flow. Times are unix microseconds.

CREATE TABLE web_sessions (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL,
    flow_id    TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;

CREATE INDEX web_sessions_user_idx ON web_sessions (user_id);
CREATE INDEX web_sessions_expiry_idx ON web_sessions (expires_at);
