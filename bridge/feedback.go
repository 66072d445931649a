package bridge

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// Action IDs of the feedback buttons on agent replies (Config.Feedback).
const (
	ActionVoteUp   = "vote_up"
	ActionVoteDown = "vote_down"
)

// Vote is one user's rating of one agent reply.
type Vote = store.Vote

// Feedback labels, shown on the buttons and in the acknowledgement.
const (
	labelUp   = "👍"
	labelDown = "👎"
)

// withFeedback puts the 👍 / 👎 buttons on an agent's answer when feedback
// is on. The buttons carry what the vote is stored with — the agent, the
// session and a reference of the reply — so that a press needs no record
// of the reply and still counts after a restart, a reset of the
// conversation or on another replica. The value stays within Discord's 100
// characters of custom_id for agent names of 32 characters and UUIDs.
func (b *Bridge) withFeedback(r Reply, agent, session string) Reply {
	if !b.cfg.Feedback {
		return r
	}
	value := agent + "." + session + "." + randomID()[:12]
	r.Buttons = append(r.Buttons,
		Button{Action: Action{ID: ActionVoteUp, Value: value}, Label: labelUp},
		Button{Action: Action{ID: ActionVoteDown, Value: value}, Label: labelDown},
	)
	return r
}

// parseVoteValue reverses withFeedback's value: agent names hold no ".",
// the reference none either; the session is what lies between.
func parseVoteValue(v string) (agent, session, reply string, ok bool) {
	agent, rest, ok1 := strings.Cut(v, ".")
	i := strings.LastIndexByte(rest, '.')
	if !ok1 || i < 0 || agent == "" || rest[i+1:] == "" {
		return "", "", "", false
	}
	return agent, rest[:i], rest[i+1:], true
}

// vote records a press of 👍 or 👎 and tells only the user who pressed it:
// a first vote is thanked, the same button again changes nothing, the
// other button changes the vote.
func (b *Bridge) vote(ctx context.Context, log *zap.Logger, ev Event) {
	agent, session, reply, ok := parseVoteValue(ev.Action.Value)
	if !ok {
		log.Debug("malformed vote", zap.String("value", ev.Action.Value))
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteUnknown})
		return
	}
	value, label := store.VoteUp, labelUp
	if ev.Action.ID == ActionVoteDown {
		value, label = store.VoteDown, labelDown
	}
	v := Vote{
		Reply: reply, Platform: ev.Platform, User: ev.User.ID, UserName: ev.User.Name,
		Conversation: ev.Conversation, Session: session, Agent: agent, Value: value, Time: b.cfg.Now(),
	}
	previous, err := b.store.PutVote(v)
	b.noteStore(err)
	if err != nil {
		b.metrics.storeFailed("put_vote")
		log.Error("vote not saved", zap.Error(err))
		b.send(ctx, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteNotSaved})
		return
	}
	text := fmt.Sprintf(msgVoteThanks, label)
	switch previous {
	case value:
		text = fmt.Sprintf(msgVoteSame, label)
	case "":
		b.metrics.feedback(agent, value)
	default:
		b.metrics.feedback(agent, value)
		text = fmt.Sprintf(msgVoteChanged, label)
	}
	log.Debug("vote", zap.String("agent", agent), zap.String("vote", value), zap.String("previous", previous))
	b.send(ctx, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: text})
}
