package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// listRecords is what "flowbridge audit" and "flowbridge feedback" share:
// read the records (fetchRecords) and print them as JSON lines or as a
// table of header and one row per record.
func listRecords[T any](ctx context.Context, env *environment, cfg *Config, apiPath string, q url.Values,
	read func(cliStore) ([]T, error), asJSON bool, header string, row func(T) string) error {
	list, err := fetchRecords(ctx, cfg, apiPath, q, read)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONLines(env.stdout, list)
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range list {
		fmt.Fprintln(tw, row(r))
	}
	return tw.Flush()
}

// fetchRecords reads records from the store or, while a running bridge
// holds the bbolt file, from its admin API at apiPath with the same query.
func fetchRecords[T any](ctx context.Context, cfg *Config, apiPath string, q url.Values, read func(cliStore) ([]T, error)) ([]T, error) {
	st, admin, err := openCLIStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var list []T
	if st != nil {
		defer st.Close()
		list, err = read(st)
		err = storeError(cfg, err)
	} else {
		err = admin.get(ctx, apiPath+"?"+q.Encode(), &list)
	}
	if err != nil {
		return nil, err
	}
	return list, nil
}

// listHandler serves the records a filter read from the query selects, to
// listRecords on the command line.
func listHandler[F, T any](filter func(url.Values) (F, error), list func(context.Context, F) ([]T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, err := filter(r.URL.Query())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := list(r.Context(), f)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// timeAndLimit reads the query keys every listing filter has: since and
// until (RFC 3339, a date, or a duration ago) and limit (0 or absent: all).
func timeAndLimit(q url.Values) (since, until time.Time, limit int, err error) {
	if since, err = parseWhen(q.Get("since"), time.Now()); err != nil {
		return since, until, 0, fmt.Errorf("since: %w", err)
	}
	if until, err = parseWhen(q.Get("until"), time.Now()); err != nil {
		return since, until, 0, fmt.Errorf("until: %w", err)
	}
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 0 {
			return since, until, 0, fmt.Errorf("limit: %q is not a count", l)
		}
	}
	return since, until, limit, nil
}

// listFlags are a listing command's flags: the ones every listing takes
// (-since, -until, -limit, -json) and its own filters, each a string flag
// whose name is also its key in the admin API's query.
type listFlags struct {
	since, until *string
	limit        *int
	asJSON       *bool
	filters      map[string]*string
}

// newListFlags declares them on fs; filters pairs each filter's name with
// its usage, and limitUsage says what -limit counts.
func newListFlags(fs *flag.FlagSet, limitUsage string, filters ...[2]string) *listFlags {
	l := &listFlags{
		since:   fs.String("since", "", "from this time: RFC 3339, 2006-01-02, or a duration ago (24h)"),
		until:   fs.String("until", "", "up to this time"),
		filters: make(map[string]*string, len(filters)),
	}
	for _, f := range filters {
		l.filters[f[0]] = fs.String(f[0], "", f[1])
	}
	l.limit = fs.Int("limit", 0, limitUsage)
	l.asJSON = fs.Bool("json", false, "JSON lines instead of a table")
	return l
}

// query returns the flags' values as the admin API's query.
func (l *listFlags) query() url.Values {
	q := url.Values{"since": {*l.since}, "until": {*l.until}, "limit": {fmt.Sprint(*l.limit)}}
	for name, v := range l.filters {
		q.Set(name, *v)
	}
	return q
}
