package store

import "time"

// Votes a user can give an agent reply.
const (
	VoteUp   = "up"
	VoteDown = "down"
)

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
	PutVote(v Vote) (previous string, err error)
	// Votes returns the votes f selects, oldest first.
	Votes(f FeedbackFilter) ([]Vote, error)
}
