package bridge

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

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

// withFeedback puts the 👍 / 👎 buttons on an agent's answer to ev when
// feedback is on, and records the answer (store.Answer: the message it
// answers, its agent and session, its beginning) under the reference the
// buttons carry. A vote counts only for an answer so recorded, and takes
// its agent from the record: the button value comes back from the
// platform as any user may forge it. When the record could not be written
// the answer goes without buttons rather than with ones that would be
// refused. The value stays within Discord's 100 characters of custom_id
// for agent names of 32 characters and UUIDs.
func (b *Bridge) withFeedback(ctx context.Context, log *zap.Logger, ev Event, r Reply, agent, session string) Reply {
	if !b.cfg.Feedback {
		return r
	}
	ref := randomID()[:12]
	err := b.noteWrite(func() error {
		return b.store.PutAnswer(recordCtx(ctx), store.Answer{
			Reply: ref, Platform: ev.Platform, Conversation: ev.Conversation, Agent: agent, Session: session,
			Turn: ev.Key, Excerpt: excerpt(r.Text), Time: b.cfg.Now(),
		})
	})
	if err != nil {
		b.metrics.storeFailed("put_answer")
		log.Warn("answer not recorded for feedback; it goes without vote buttons", zap.Error(err))
		return r
	}
	value := agent + "." + session + "." + ref
	r.Buttons = append(r.Buttons,
		Button{Action: Action{ID: ActionVoteUp, Value: value}, Label: labelUp},
		Button{Action: Action{ID: ActionVoteDown, Value: value}, Label: labelDown},
	)
	return r
}

// excerpt is the beginning of text on one line, at most store.MaxExcerpt
// characters, an ellipsis marking a cut.
func excerpt(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(s) <= store.MaxExcerpt {
		return s
	}
	return string([]rune(s)[:store.MaxExcerpt-1]) + "…"
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
// other button changes the vote. The value names a recorded answer
// (withFeedback) of a configured agent, or the press is refused: what the
// store keeps and the metrics count come from the config and the record,
// never from the value alone, so forged presses grow neither.
func (b *Bridge) vote(ctx context.Context, log *zap.Logger, ev Event) {
	agent, session, reply, ok := parseVoteValue(ev.Action.Value)
	if !ok {
		log.Debug("malformed vote", zap.String("value", ev.Action.Value))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteUnknown})
		return
	}
	a, ok, err := b.store.Answer(ctx, ev.Platform, reply)
	if err != nil {
		b.metrics.storeFailed("answer")
		log.Error("answer lookup for a vote", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteNotSaved})
		return
	}
	_, configured := b.set.cat.Load().agents[a.Agent]
	if !ok || a.Agent != agent || a.Session != session || !configured {
		log.Debug("vote on an unknown answer", zap.String("value", ev.Action.Value), zap.Bool("recorded", ok), zap.Bool("configured", configured))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteUnknown})
		return
	}
	value, label := store.VoteUp, labelUp
	if ev.Action.ID == ActionVoteDown {
		value, label = store.VoteDown, labelDown
	}
	v := Vote{
		Reply: reply, Platform: ev.Platform, User: ev.User.ID, UserName: ev.User.Name,
		Conversation: a.Conversation, Session: a.Session, Agent: a.Agent, Turn: a.Turn, Excerpt: a.Excerpt,
		Value: value, Time: b.cfg.Now(), Message: ev.Action.Message, Link: ev.Action.Link,
	}
	var previous string
	err = b.noteWrite(func() (err error) {
		previous, err = b.store.PutVote(ctx, v)
		return err
	})
	if err != nil {
		b.metrics.storeFailed("put_vote")
		log.Error("vote not saved", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgVoteNotSaved})
		return
	}
	text := fmt.Sprintf(msgVoteThanks, label)
	switch previous {
	case value:
		text = fmt.Sprintf(msgVoteSame, label)
	case "":
		b.metrics.feedback(a.Agent, value)
	default:
		b.metrics.feedback(a.Agent, value)
		text = fmt.Sprintf(msgVoteChanged, label)
	}
	log.Debug("vote", zap.String("agent", a.Agent), zap.String("vote", value), zap.String("previous", previous))
	b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: text})
}
