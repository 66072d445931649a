-- The outbox: an entry's answer, kept from when it is known until the
-- platform has accepted it (store.Outbox). The entry is Sent meanwhile, so
-- the pending indexes cover it; Finish clears it with the event.

-- +goose Up
ALTER TABLE inbox ADD COLUMN outbox bytea;

-- +goose Down
ALTER TABLE inbox DROP COLUMN outbox;
