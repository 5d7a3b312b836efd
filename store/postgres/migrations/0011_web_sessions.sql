-- Browsers' signed-in sessions: the SHA-256 of the cookie's value (hex),
-- never the value; one per sign-in flow.

CREATE TABLE web_sessions (
    id         text COLLATE "C" PRIMARY KEY,
    user_id    text COLLATE "C" NOT NULL,
    flow_id    text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX web_sessions_user_idx ON web_sessions (user_id);
CREATE INDEX web_sessions_expiry_idx ON web_sessions (expires_at);
