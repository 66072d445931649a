-- Who stopped an inbox entry's work (store.Stops): '' while nobody did.
-- Stop sets it only while the entry is not answered and nobody stopped it
-- before, and PutReply writes an answer only while it is '', each in one
-- statement, so of a Stop and a PutReply of one entry exactly one goes
-- first. Finish answers a stopped entry as any other and leaves the column
-- as it is. The constant default adds the column without rewriting the
-- table.
--
-- An older flowbridge refuses a database migrated past what it knows
-- (ErrNewerSchema). Migrated down, the stops are lost: an entry stopped and
-- not yet answered is then answered as if nobody had stopped it.

-- +goose Up
ALTER TABLE inbox ADD COLUMN stopped_by text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE inbox DROP COLUMN stopped_by;
