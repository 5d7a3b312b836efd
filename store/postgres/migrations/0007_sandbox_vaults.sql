-- Credential Vaults of sandboxes (OpenSandbox's sandbox-local vault on the
-- egress API): one row per sandbox that has one. sealed is the whole vault
-- document (credentials with their values, bindings) sealed by the server
-- (AES-256-GCM under its master key, bound to the sandbox id), never in
-- the clear; revision is the vault's, compared by every update.

CREATE TABLE sandbox_vaults (
    sandbox_id text COLLATE "C" PRIMARY KEY,
    revision   bigint NOT NULL,
    sealed     text NOT NULL,
    updated_at timestamptz NOT NULL
);
