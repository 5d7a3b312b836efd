-- Entries of one type in seq order: where a reply starts and ends, found
-- without reading the stream.
CREATE INDEX stream_entries_type_idx ON stream_entries (stream, type, seq);
