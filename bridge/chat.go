package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/bridge/workspace"
)

// chat sends a message to the conversation's agent and replies with its answer.
//
// Its refusals (too long, too fast, the agent not offered here, no free
// slot, no file it could read) are not ephemeral: each stands in for the
// answer, which everyone in the conversation would have seen, and goes
// through the outbox named once (tell), which needs a message the platform
// can find again (a Slack ephemeral cannot be).
func (b *Bridge) chat(ctx context.Context, log *zap.Logger, ev Event) {
	text := sanitize(ev.Text)
	if strings.TrimSpace(text) == "" && len(ev.Files) == 0 {
		return // a bare mention: nothing to ask
	}
	if len(text) > b.limitsNow().MaxMessageBytes {
		b.metrics.refused("message_too_long")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgTooLong, len(text), b.limitsNow().MaxMessageBytes)})
		return
	}
	cat := b.set.cat.Load()
	var agent *Agent
	err := b.readStore(ctx, log, ev, "agent_lookup", func() (err error) {
		agent, err = b.conversationAgent(ctx, cat, ev)
		return err
	})
	if errors.Is(err, errLeft) {
		return
	}
	if err != nil {
		log.Error("agent lookup", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: msgStoreFailed})
		return
	}
	if agent == nil {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: msgNoAgent})
		return
	}
	if len(agent.Channels) > 0 && !slices.Contains(agent.Channels, ev.Channel) {
		b.metrics.refused("agent_channel")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgAgentChannel, agent.Name)})
		return
	}
	if ok, wait := b.set.limits.Load().allowChat(ev.Platform, ev.User.ID); !ok {
		b.metrics.refused("chat_rate")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: fmt.Sprintf(msgChatRate, humanWait(wait))})
		return
	}
	if !b.acquire() {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: msgInFlight})
		return
	}
	defer b.release()

	text, skipped := b.readFiles(ctx, ev, text)
	// The files not read are told with the answer, in the same message:
	// a notice of their own before the agent's answer could be neither kept
	// with the entry (which is not done yet) nor told once after a crash.
	var skippedNote string
	if len(skipped) > 0 {
		b.metrics.refused("file")
		skippedNote = skippedText(skipped, strings.TrimSpace(text) != "")
	}
	if strings.TrimSpace(text) == "" {
		if skippedNote != "" {
			b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: skippedNote})
		}
		return // nothing the agent could read
	}
	// The session is read before the entry is marked sent: a store that
	// does not answer then leaves the message received, to be run again,
	// rather than lost as "sent".
	var sess Session
	var have bool
	err = b.readStore(ctx, log, ev, "load_session", func() (err error) {
		sess, have, err = b.store.Session(ctx, ev.Conversation)
		return err
	})
	if errors.Is(err, errLeft) {
		return
	}
	if err != nil {
		log.Error("session lookup", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Text: msgStoreFailed})
		return
	}
	// The thread is read before the entry is marked sent too, like the
	// files: a crash while reading it leaves the message to be run again.
	lead := b.threadLead(ctx, log, ev, have)
	if !b.markSent(ctx, log, ev) {
		return
	}
	b.sessionStatus(ctx, ev, SessionProcessing)
	defer b.sessionStatus(ctx, ev, SessionActive)
	stop := b.indicate(ctx, ev.reply)
	log = log.WithLazy(zap.String("agent", agent.Name))
	if ce := log.Check(zap.DebugLevel, "chat message"); ce != nil {
		// Checked first: Debug(msg, fields...) allocates its fields for every message, at any level.
		ce.Write(zap.String("text", text))
	}
	titler := b.titler(ctx, log, ev)
	asked, told := b.withContext(ctx, log, ev, lead+text)
	stopProgress := b.progress(ctx, log, ev.reply, "", func(elapsed time.Duration) Reply {
		return withStop(ev.Key, thinkingProgress(elapsed))
	})
	out, sess, renewed, err := b.ask(ctx, log, ev.Conversation, agent, sess, have, asked)
	stopProgress()
	stop()
	if err == nil {
		told()
	}
	if titler != nil {
		defer b.title(ctx, log, titler, titleSource(ev, text))
	}
	if err != nil {
		log.Warn("chat failed", zap.Error(err))
		b.deliver(ctx, log, ev, "", withNote(Reply{Kind: ReplyError, Text: chatErrorText(ctx, err)}, skippedNote), nil)
		return
	}
	if renewed {
		out = msgSessionRenewed + "\n\n" + out
	}
	if strings.TrimSpace(out) == "" {
		out = msgEmptyReply
	}
	sess.LastUsed = b.cfg.Now()
	turn := &Turn{Session: sess, Reply: out}
	if ev.Parent != "" {
		turn.Also = []string{shareKey(ev.Parent, ev.User.ID)}
	}
	b.deliver(ctx, log, ev, "", withNote(b.asFile(ev, b.withFeedback(ctx, log, ev, Reply{Kind: ReplyAgent, Text: out}, agent.Name, sess.SessionUUID), "reply", nil), skippedNote), turn)
}

// withNote puts note (the files not sent to the agent) at the head of r.
func withNote(r Reply, note string) Reply {
	if note != "" {
		r.Text = note + "\n\n" + r.Text
	}
	return r
}

// indicate starts the responder's working indicator once the answer has
// taken longer than the configured delay, and returns the function that ends
// it. An answer within the delay needs no indicator: users do not notice a
// wait that short, and skipping it spares the platform calls (Slack's
// placeholder post, Discord's typing request, which Discord asks bots to send
// only for work that takes seconds) and the platform's rate limits.
func (b *Bridge) indicate(ctx context.Context, r Responder) (stop func()) {
	t, ok := r.(Typist)
	if !ok {
		return func() {}
	}
	if b.cfg.IndicatorDelay <= 0 {
		return t.Typing(ctx)
	}
	// One value holds what the timer and stop share (see progress).
	ind := &indicator{ctx: ctx, t: t}
	ind.timer = time.AfterFunc(b.cfg.IndicatorDelay, ind.start)
	return ind.stop
}

// indicator is one answer's working indicator, started once the answer
// has taken longer than the delay (see indicate).
type indicator struct {
	ctx        context.Context
	t          Typist
	timer      *time.Timer
	mu         sync.Mutex
	ended      bool
	stopTyping func()
}

func (ind *indicator) start() {
	ind.mu.Lock()
	defer ind.mu.Unlock()
	if !ind.ended {
		ind.stopTyping = ind.t.Typing(ind.ctx)
	}
}

func (ind *indicator) stop() {
	ind.timer.Stop()
	ind.mu.Lock()
	defer ind.mu.Unlock()
	ind.ended = true
	if ind.stopTyping != nil {
		ind.stopTyping()
	}
}

// ask sends text on the conversation's session sess (have: it has one),
// creating the session first when there is none. A 404 means the workspace
// forgot the session: the mapping is dropped, a new session made and the
// message sent once more (renewed = true).
func (b *Bridge) ask(ctx context.Context, log *zap.Logger, key string, agent *Agent, sess Session, have bool, text string) (out string, _ Session, renewed bool, err error) {
	if !have || sess.Agent != agent.Name {
		if sess, err = b.newSession(ctx, log, key, agent); err != nil {
			return "", sess, false, err
		}
	}
	reply, err := b.ws.Chat(ctx, agent.UUID, sess.SessionUUID, text)
	if errors.Is(err, workspace.ErrNotFound) {
		log.Info("session gone; starting a new one", zap.String("session_id", sess.SessionUUID))
		drop := func() error { _, err := b.store.DeleteSession(ctx, key); return err }
		if err := b.retryStore(ctx, log, "drop_session", drop, never, always); err != nil {
			return "", sess, false, fmt.Errorf("drop session: %w", err)
		}
		if sess, err = b.newSession(ctx, log, key, agent); err != nil {
			return "", sess, false, err
		}
		renewed = true
		reply, err = b.ws.Chat(ctx, agent.UUID, sess.SessionUUID, text)
	}
	if err != nil {
		return "", sess, renewed, err
	}
	return reply.Output, sess, renewed, nil
}

// newSession creates a session in the workspace and keeps it. Keeping it
// waits out a store fault as the inbox's writes do (a database restart, a
// connection cut): given up at once, the session just made was lost and
// the user told to try again.
func (b *Bridge) newSession(ctx context.Context, log *zap.Logger, key string, agent *Agent) (Session, error) {
	id, err := b.ws.CreateSession(ctx, agent.UUID)
	if err != nil {
		return Session{}, &sessionError{err: err}
	}
	now := b.cfg.Now()
	s := Session{Key: key, Agent: agent.Name, SessionUUID: id, Created: now, LastUsed: now}
	put := func() error { return b.store.PutSession(ctx, s) }
	err = b.retryStore(ctx, log, "save_session", put, never, always)
	if err != nil {
		b.metrics.storeFailed("save_session")
		return Session{}, fmt.Errorf("save session: %w", err)
	}
	b.log.Info("session created", zap.String("conversation", key), zap.String("agent", agent.Name), zap.String("session_id", id))
	return s, nil
}

// never and always are retryStore's taken and keep for a write that may
// simply be made again, by whoever makes it.
func never(error) bool { return false }
func always() bool     { return true }

// sessionError marks a failure to create a session, which users should hear
// about differently from a failed message (a 404 there means a wrong agent UUID).
type sessionError struct{ err error }

func (e *sessionError) Error() string { return "create session: " + e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// conversationAgent returns the agent an event's conversation uses: its
// stored choice while that agent still exists, else its channel's (for a
// thread), else its channel's configured default (Agent.DefaultChannels),
// else the default agent.
func (b *Bridge) conversationAgent(ctx context.Context, cat *catalog, ev Event) (*Agent, error) {
	for _, key := range []string{ev.Conversation, ev.Parent} {
		if key == "" {
			continue
		}
		name, ok, err := b.store.ConversationAgent(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			if a, found := cat.agents[name]; found {
				return a, nil
			}
		}
	}
	if a, ok := cat.channelAgents[ev.Channel]; ok {
		return a, nil
	}
	return cat.defaultAgent, nil
}

// shareKey is where a user's latest agent reply in a channel is kept, for
// "/agent share" typed in the channel rather than in one of its threads.
// Conversation keys never contain "#".
func shareKey(channelKey, userID string) string {
	return channelKey + "#" + userID
}

// sanitize makes text safe to forward: invalid UTF-8 replaced and control
// characters other than newline and tab dropped.
func sanitize(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f
}
