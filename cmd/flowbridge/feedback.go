package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// cmdFeedback lists the votes on agent replies, as a table or JSON lines.
func cmdFeedback(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "feedback", "feedback -config FILE [-since 24h] [-until T] [-agent NAME] [-user ID] [-vote up|down] [-platform slack|discord|console] [-limit N] [-json]")
	path := configFlag(fs, env)
	lf := newListFlags(fs, "at most this many votes, oldest first (0: all)",
		[2]string{"agent", "only this agent"}, [2]string{"user", "only this user ID"},
		[2]string{"vote", "only this vote: up or down"}, [2]string{"platform", "only this platform"})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, env.getenv)
	if err != nil {
		return err
	}
	q := lf.query()
	filter, err := feedbackFilterFromQuery(q)
	if err != nil {
		return &usageError{err.Error()}
	}
	return listRecords(ctx, env, cfg, "/api/feedback", q, func(st cliStore) ([]store.Vote, error) { return st.Votes(filter) }, *lf.asJSON,
		"TIME\tPLATFORM\tUSER\tAGENT\tVOTE\tCONVERSATION\tSESSION\tREPLY",
		func(v store.Vote) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", v.Time.UTC().Format(time.RFC3339), v.Platform, tableValue(v.User),
				tableValue(v.Agent), v.Value, tableValue(v.Conversation), tableValue(v.Session), tableValue(v.Reply))
		})
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
