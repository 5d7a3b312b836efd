-- Credential Vaults of sandboxes (OpenSandbox's sandbox-local vault on the
-- egress API): one row per sandbox that has one. sealed is the whole vault
-- document (credentials with their values, bindings) sealed by the server
-- (AES-256-GCM under its master key, bound to the sandbox id), never in
-- the clear; revision is the vault's, compared by every update. Times are
-- unix microseconds.

CREATE TABLE sandbox_vaults (
    sandbox_id TEXT PRIMARY KEY,
    revision   INTEGER NOT NULL,
    sealed     TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
