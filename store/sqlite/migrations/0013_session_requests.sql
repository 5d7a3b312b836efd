-- What a Session's front records for the holder of its runtime, which
-- carries it out and clears it: an interrupt of the reply in progress
-- (when it was asked, unix microseconds) and the answer to the pending
-- interaction (JSON), so that they reach the holder as inputs do.

ALTER TABLE sessions ADD COLUMN interrupt_requested_at INTEGER;
ALTER TABLE sessions ADD COLUMN answer BLOB;
