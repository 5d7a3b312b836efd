-- The process that reserved an Idempotency-Key (its replica's address and
-- boot id), so that a reservation held by a process that died is released
-- as soon as that is known; '' for reservations made before.

ALTER TABLE idempotency ADD COLUMN holder text NOT NULL DEFAULT '';
