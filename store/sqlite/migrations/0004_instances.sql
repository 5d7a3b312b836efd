-- Owned backends: each record names the backend instance its box lives on
-- (native: one host's backend; docker: one engine), so a replica touches
-- only the boxes of instances it serves. Records from before are the one
-- server's own: the server adopts them (fills the instance) at start.

ALTER TABLE sandboxes ADD COLUMN instance TEXT NOT NULL DEFAULT '';

CREATE INDEX sandboxes_instance_idx ON sandboxes (backend, instance);
