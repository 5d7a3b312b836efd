-- Warm pools: a box waiting to be claimed carries its pool's key; users'
-- sandboxes have the empty pool.

ALTER TABLE sandboxes ADD COLUMN pool TEXT NOT NULL DEFAULT '';

CREATE INDEX sandboxes_pool_idx ON sandboxes (pool, state, created_at, id) WHERE pool <> '';
