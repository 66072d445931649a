package store

import (
	"context"
	"time"
)

// Votes a user can give an agent reply.
const (
	VoteUp   = "up"
	VoteDown = "down"
)

// MaxExcerpt is the most characters an Answer's excerpt holds.
const MaxExcerpt = 300

// Vote is one user's rating of one agent reply. A user has at most one vote
// per reply: a later vote replaces it.
type Vote struct {
	// Reply is the reference the core gave the rated reply when it sent it.
	Reply        string
	Platform     string
	User         string
	UserName     string
	Conversation string
	// Session is the Agent session the reply came from, Agent its agent.
	Session string
	Agent   string
	// Value is VoteUp or VoteDown.
	Value string
	// Time is when the vote was last cast or changed.
	Time time.Time
	// Message is the platform's reference of the message that carried the
	// buttons ("C0456/1716212345.000100" on Slack, "<channel>/<message>"
	// on Discord), Link its permalink; both "" where the platform did not
	// say.
	Message, Link string
	// Turn and Excerpt come from the rated reply's Answer: the platform
	// key of the message it answered and its beginning. Both are "" when
	// no Answer was recorded (feedback from before it was, or pruned).
	Turn, Excerpt string
}

// Answer is what the core records of an agent reply when it offers it for
// rating, so that a vote can say which answer it rates.
type Answer struct {
	// Reply is the reference the reply's buttons carry; with Platform, the
	// key.
	Reply    string
	Platform string
	// Conversation, Agent and Session are where the reply was given.
	Conversation string
	Agent        string
	Session      string
	// Turn is the platform key of the message the reply answered, as the
	// inbox knows it ("slack/msg/C0456/1716212345.000100").
	Turn string
	// Excerpt is the reply's beginning on one line, at most MaxExcerpt
	// characters.
	Excerpt string
	Time    time.Time
}

// FeedbackFilter selects votes; its conditions are ANDed and zero values
// match everything.
type FeedbackFilter struct {
	// Since (inclusive) and Until (exclusive) bound the votes' time.
	Since, Until time.Time
	// Agent, User, Value, Platform and Reply match exactly when set.
	Agent, User, Value, Platform, Reply string
	// Limit caps the votes returned, oldest first (0: no cap).
	Limit int
}

// Feedback keeps the votes users give agent replies.
type Feedback interface {
	// PutVote records v as v.User's vote on v.Reply (per v.Platform),
	// replacing an earlier one, and returns the value it replaced ("" when
	// the user had not voted on the reply). A vote equal to the one held
	// writes nothing, and its time stays that of the first.
	PutVote(ctx context.Context, v Vote) (previous string, err error)
	// Votes returns the votes f selects, oldest first.
	Votes(ctx context.Context, f FeedbackFilter) ([]Vote, error)
	// PutAnswer records a, replacing an Answer with its platform and reply.
	PutAnswer(ctx context.Context, a Answer) error
	// Answer returns the Answer recorded under platform and reply; ok is
	// false when there is none.
	Answer(ctx context.Context, platform, reply string) (a Answer, ok bool, err error)
	// PruneAnswers deletes the Answers recorded before before and returns
	// how many. Votes keep what they took from them.
	PruneAnswers(ctx context.Context, before time.Time) (int, error)
}
