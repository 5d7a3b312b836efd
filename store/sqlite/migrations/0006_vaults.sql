-- Credential vaults of the agent platform. A vault's secrets are one JSON
-- array of {name, host, path_prefix, header, format, sealed, updated_at};
-- every value in it is sealed by the platform (AES-256-GCM under the
-- server's master key), never in the clear. Times are unix microseconds.

CREATE TABLE vaults (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    secrets     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
