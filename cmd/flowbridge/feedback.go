package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// cmdFeedback lists the votes on agent replies, each with the answer it
// rates, as a table, JSON lines or CSV.
func cmdFeedback(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "feedback", "feedback -config FILE [-since 24h] [-until T] [-agent NAME] [-user ID] [-vote up|down] [-platform slack|discord|console] [-limit N] [-json | -csv]")
	path := configFlag(fs, env)
	lf := newListFlags(fs, "at most this many votes, oldest first (0: all)",
		[2]string{"agent", "only this agent"}, [2]string{"user", "only this user ID"},
		[2]string{"vote", "only this vote: up or down"}, [2]string{"platform", "only this platform"})
	asCSV := fs.Bool("csv", false, "CSV with a header row instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *asCSV && *lf.asJSON {
		return &usageError{"-csv and -json: choose one"}
	}
	cfg, err := loadStoreConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	env.config(cfg)
	q := lf.query()
	filter, err := feedbackFilterFromQuery(q)
	if err != nil {
		return &usageError{err.Error()}
	}
	read := func(st cliStore) ([]store.Vote, error) { return st.Votes(ctx, filter) }
	if *asCSV {
		votes, err := fetchRecords(ctx, cfg, "/api/feedback", q, read)
		if err != nil {
			return err
		}
		return writeVotesCSV(env.stdout, votes)
	}
	return listRecords(ctx, env, cfg, "/api/feedback", q, read, *lf.asJSON,
		"TIME\tPLATFORM\tUSER\tAGENT\tVOTE\tCONVERSATION\tMESSAGE\tANSWER",
		func(v store.Vote) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", v.Time.UTC().Format(time.RFC3339), v.Platform, tableValue(v.User),
				tableValue(v.Agent), v.Value, tableValue(v.Conversation), tableValue(cmp.Or(v.Message, v.Reply)),
				tableValue(shorten(v.Excerpt, excerptColumn)))
		})
}

// excerptColumn is how much of an answer the table shows; -json and -csv
// have all the excerpt holds.
const excerptColumn = 60

func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// voteColumns are the CSV export's columns, one per field of store.Vote.
var voteColumns = []string{"time", "platform", "user", "user_name", "agent", "session", "vote",
	"conversation", "message", "link", "turn", "excerpt", "reply"}

// writeVotesCSV writes votes as CSV (RFC 4180) with a header row; times
// are RFC 3339 in UTC. The free text (user names, answer excerpts) gets a
// leading apostrophe where it starts like a spreadsheet formula (= + - @),
// so opening the export cannot run what an answer wrote.
func writeVotesCSV(w io.Writer, votes []store.Vote) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(voteColumns); err != nil {
		return err
	}
	for _, v := range votes {
		if err := cw.Write([]string{v.Time.UTC().Format(time.RFC3339Nano), v.Platform, v.User, noFormula(v.UserName), v.Agent, v.Session,
			v.Value, v.Conversation, v.Message, v.Link, v.Turn, noFormula(v.Excerpt), v.Reply}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// feedbackFilterFromQuery reads since, until (RFC 3339 or a duration ago),
// agent, user, vote, platform and limit.
func feedbackFilterFromQuery(q url.Values) (store.FeedbackFilter, error) {
	var f store.FeedbackFilter
	var err error
	if f.Since, f.Until, f.Limit, err = timeAndLimit(q); err != nil {
		return f, err
	}
	f.Agent, f.User, f.Value, f.Platform = q.Get("agent"), q.Get("user"), q.Get("vote"), q.Get("platform")
	switch f.Value {
	case "", store.VoteUp, store.VoteDown:
	default:
		return f, fmt.Errorf("vote: %q is neither %s nor %s", f.Value, store.VoteUp, store.VoteDown)
	}
	return f, nil
}

func noFormula(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
