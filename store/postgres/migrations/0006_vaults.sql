-- Credential vaults of the agent platform. A vault's secrets are one JSON
-- array of {name, host, path_prefix, header, format, sealed, updated_at},
-- kept byte for byte; every value in it is sealed by the platform
-- (AES-256-GCM under the server's master key), never in the clear.

CREATE TABLE vaults (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    description text NOT NULL,
    secrets     bytea NOT NULL,
    version     bigint NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
