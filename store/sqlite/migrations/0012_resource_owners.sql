-- Owners of the named records the backends keep: snapshots (kind
-- 'snapshot', named by id) and named volumes (kind 'volume'), per backend.
-- The backends keep the records; only who owns them is here. A record
-- without a row was made before owners were kept and is the bootstrap
-- key's user's, "admin". Times are unix microseconds (UTC).

CREATE TABLE resource_owners (
    kind       TEXT NOT NULL,
    backend    TEXT NOT NULL,
    name       TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    org_id     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kind, backend, name)
) STRICT;

CREATE INDEX resource_owners_owner_idx ON resource_owners (kind, owner_id, backend, name);
