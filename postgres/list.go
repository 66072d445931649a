package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// listQuery builds the SELECT of a listing (Audit, Votes): a time window,
// equality filters, an order and a limit, with numbered parameters.
type listQuery struct {
	where []string
	args  []any
}

func (l *listQuery) cond(col, op string, v any) {
	l.args = append(l.args, v)
	l.where = append(l.where, col+" "+op+" $"+strconv.Itoa(len(l.args)))
}

// window keeps the rows with since <= at < until; a zero bound is open.
func (l *listQuery) window(since, until time.Time) {
	if !since.IsZero() {
		l.cond("at", ">=", since)
	}
	if !until.IsZero() {
		l.cond("at", "<", until)
	}
}

// equal keeps the rows whose column col is v, for each non-empty v.
func (l *listQuery) equal(col, v string) {
	if v != "" {
		l.cond(col, "=", cleanText(v))
	}
}

// sql returns the statement: sel, the conditions, order and limit (none
// when not positive).
func (l *listQuery) sql(sel, order string, limit int) string {
	q := sel
	if len(l.where) > 0 {
		q += " WHERE " + strings.Join(l.where, " AND ")
	}
	q += " ORDER BY " + order
	if limit > 0 {
		l.args = append(l.args, limit)
		q += " LIMIT $" + strconv.Itoa(len(l.args))
	}
	return q
}

// list runs q with args and collects its rows with scan; errors name what.
func list[T any](ctx context.Context, s *Store, what, q string, args []any, scan pgx.RowToFunc[T]) ([]T, error) {
	ctx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
