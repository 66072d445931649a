package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// AppendAudit appends e to the audit log; a zero e.Time is refused. Text PostgreSQL cannot hold (invalid UTF-8, NUL bytes) is stored
// with U+FFFD in its place: an entry is never lost to its text.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if err := checkTime("audit", e.Time); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	var params []byte
	if len(e.Params) > 0 {
		clean := make(map[string]string, len(e.Params))
		for k, v := range e.Params {
			clean[cleanText(k)] = cleanText(v)
		}
		var err error
		if params, err = json.Marshal(clean); err != nil {
			return fmt.Errorf("append audit: %w", err)
		}
	}
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	defer cancel()
	_, err = s.pool.Exec(ctx, `
		INSERT INTO audit (at, platform, user_id, user_name, channel, conversation, flow, params, outcome, detail, duration_ns, approver)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		e.Time, cleanText(e.Platform), cleanText(e.User), cleanText(e.UserName), cleanText(e.Channel),
		cleanText(e.Conversation), cleanText(e.Flow), jsonParam(params), cleanText(e.Outcome), cleanText(e.Detail),
		int64(e.Duration), cleanText(e.Approver))
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// jsonParam is b as a json parameter, with none as NULL.
func jsonParam(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Audit returns the entries f selects, oldest first (equal times in the
// order appended).
func (s *Store) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	var l listQuery
	l.window(f.Since, f.Until)
	l.equal("flow", f.Flow)
	l.equal("user_id", f.User)
	l.equal("outcome", f.Outcome)
	l.equal("platform", f.Platform)
	order := "at, id"
	if f.Newest {
		order = "at DESC, id DESC"
	}
	q := l.sql(`SELECT at, platform, user_id, user_name, channel, conversation, flow, params, outcome, detail, duration_ns, approver FROM audit`, order, f.Limit)
	out, err := list(ctx, s, "audit", q, l.args, func(row pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		var params []byte
		var ns int64
		err := row.Scan(&e.Time, &e.Platform, &e.User, &e.UserName, &e.Channel, &e.Conversation, &e.Flow,
			&params, &e.Outcome, &e.Detail, &ns, &e.Approver)
		if err != nil {
			return e, err
		}
		e.Duration = time.Duration(ns)
		if params != nil {
			if err := json.Unmarshal(params, &e.Params); err != nil {
				return e, fmt.Errorf("params of the entry of %v: %w", e.Time, err)
			}
		}
		return e, nil
	})
	if err != nil {
		return nil, err
	}
	if f.Newest {
		slices.Reverse(out)
	}
	return out, nil
}

// PruneAudit deletes the entries older than before and returns how many,
// in statements of at most s.batch rows.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	n, err := s.deleteBatches(ctx, `
		DELETE FROM audit WHERE id IN (
			SELECT id FROM audit WHERE at < $1 ORDER BY at, id LIMIT $2 FOR UPDATE SKIP LOCKED)`, before)
	if err != nil {
		return n, fmt.Errorf("prune audit: %w", err)
	}
	return n, nil
}
