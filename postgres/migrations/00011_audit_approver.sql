-- Who approved or refused a flow run that waited for approval
-- (store.AuditEntry.Approver); '' for the runs nobody else approved.

-- +goose Up

ALTER TABLE audit ADD COLUMN approver text NOT NULL DEFAULT '';

-- +goose Down

ALTER TABLE audit DROP COLUMN approver;
