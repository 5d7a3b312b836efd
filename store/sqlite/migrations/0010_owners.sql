-- Owners: sandboxes, agents and sessions name the user that owns them and
-- that user's organization. Records made before identity existed were made
-- with the single bootstrap key, whose user is "admin". Agents also say who
-- may use them: visibility is private, shared (with allowed_user_ids) or
-- public, and admins are the users besides the owner who may manage one.
-- Lists are JSON arrays, NULL for none.

ALTER TABLE sandboxes ADD COLUMN owner_id TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE sandboxes ADD COLUMN org_id TEXT NOT NULL DEFAULT 'default';

CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);

ALTER TABLE agents ADD COLUMN owner_id TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE agents ADD COLUMN org_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE agents ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private';
ALTER TABLE agents ADD COLUMN allowed_user_ids TEXT;
ALTER TABLE agents ADD COLUMN admins TEXT;

ALTER TABLE sessions ADD COLUMN owner_id TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE sessions ADD COLUMN org_id TEXT NOT NULL DEFAULT 'default';

CREATE INDEX sessions_owner_idx ON sessions (owner_id, id);
