-- Owners: sandboxes, agents and sessions name the user that owns them and
-- that user's organization. Records made before identity existed were made
-- with the single bootstrap key, whose user is "admin". Agents also say who
-- may use them: visibility is private, shared (with allowed_user_ids) or
-- public, and admins are the users besides the owner who may manage one. A
-- NULL list is none.

ALTER TABLE sandboxes
    ADD COLUMN owner_id text COLLATE "C" NOT NULL DEFAULT 'admin',
    ADD COLUMN org_id   text COLLATE "C" NOT NULL DEFAULT 'default';

CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);

ALTER TABLE agents
    ADD COLUMN owner_id         text COLLATE "C" NOT NULL DEFAULT 'admin',
    ADD COLUMN org_id           text COLLATE "C" NOT NULL DEFAULT 'default',
    ADD COLUMN visibility       text NOT NULL DEFAULT 'private',
    ADD COLUMN allowed_user_ids text[],
    ADD COLUMN admins           text[];

ALTER TABLE sessions
    ADD COLUMN owner_id text COLLATE "C" NOT NULL DEFAULT 'admin',
    ADD COLUMN org_id   text COLLATE "C" NOT NULL DEFAULT 'default';

CREATE INDEX sessions_owner_idx ON sessions (owner_id, id);
