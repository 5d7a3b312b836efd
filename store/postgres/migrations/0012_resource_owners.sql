-- Owners of the named records the backends keep: snapshots (kind
-- 'snapshot', named by id) and named volumes (kind 'volume'), per backend.
-- The backends keep the records; only who owns them is here. A record
-- without a row was made before owners were kept and is the bootstrap
-- key's user's, "admin".

CREATE TABLE resource_owners (
    kind       text COLLATE "C" NOT NULL,
    backend    text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    owner_id   text COLLATE "C" NOT NULL,
    org_id     text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (kind, backend, name)
);

CREATE INDEX resource_owners_owner_idx ON resource_owners (kind, owner_id, backend, name);
