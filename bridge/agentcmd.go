package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
)

// agentCommand handles "/agent SUB" and "!agent SUB".
func (b *Bridge) agentCommand(ctx context.Context, log *zap.Logger, ev Event, args string) {
	words, err := SplitArgs(sanitize(args))
	if err != nil {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "Could not read that: " + err.Error() + "."})
		return
	}
	sub := ""
	if len(words) > 0 {
		sub = strings.ToLower(words[0])
	}
	cat := b.set.cat.Load()
	switch sub {
	case "", "help":
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: agentHelp(cat, ev.reply)})
	case "status":
		b.agentStatus(ctx, log, ev, cat)
	case "reset":
		if _, err := b.store.DeleteSession(ctx, ev.Conversation); err != nil {
			log.Error("reset", zap.Error(err))
			b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgStoreFailed})
			return
		}
		log.Info("conversation reset")
		b.sessionStatus(ctx, ev, SessionClosed)
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Text: "Done: the next message here starts a new conversation."})
	case "use":
		b.agentUse(ctx, log, ev, cat, words[1:])
	case "share":
		b.agentShare(ctx, log, ev)
	default:
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf("There is no `/agent %s`. Try `status`, `reset`, `use NAME`, `share` or `help`.", sub)})
	}
}

// agentHelp is /agent help: how to talk to the agent where r is (the
// chat platforms' way, unless r is a Talker), the subcommands and the agents.
func agentHelp(cat *catalog, r Responder) string {
	var s strings.Builder
	talk, chat := msgHelpTalk, true
	if t, ok := r.(Talker); ok {
		talk, chat = t.HowToTalk(), false
	}
	s.WriteString("*Talking to the agent*\n" + talk + "\n\n")
	s.WriteString("• `/agent status`: which agent and session this conversation uses\n")
	s.WriteString("• `/agent reset`: start a new conversation (the agent forgets this one)\n")
	s.WriteString("• `/agent use NAME`: switch this conversation to another agent (admins)\n")
	s.WriteString("• `/agent share`: post the agent's latest reply here for everyone\n")
	s.WriteString("• `/flow help`: the flows you can run\n")
	if chat {
		s.WriteString(msgHelpInThread + "\n")
	}
	if len(cat.agentNames) > 0 {
		s.WriteString("\nAgents: ")
		for i, n := range cat.agentNames {
			if i > 0 {
				s.WriteString(", ")
			}
			fmt.Fprintf(&s, "`%s`", n)
			if cat.defaultAgent != nil && cat.defaultAgent.Name == n {
				s.WriteString(" (default)")
			}
		}
	}
	return s.String()
}

func (b *Bridge) agentStatus(ctx context.Context, log *zap.Logger, ev Event, cat *catalog) {
	agent, err := b.conversationAgent(ctx, cat, ev)
	if err != nil {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgStoreFailed})
		return
	}
	sess, ok, err := b.store.Session(ctx, ev.Conversation)
	if err != nil {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgStoreFailed})
		return
	}
	name := "none"
	if agent != nil {
		name = agent.Name
	}
	var s strings.Builder
	fmt.Fprintf(&s, "Agent: *%s*\n", name)
	if ok && agent != nil && sess.Agent == agent.Name {
		fmt.Fprintf(&s, "Session: `%s`\nStarted: %s · last message: %s",
			sess.SessionUUID, sess.Created.UTC().Format("2006-01-02 15:04 MST"), sess.LastUsed.UTC().Format("2006-01-02 15:04 MST"))
	} else {
		s.WriteString("Session: none yet (the next message starts one)")
	}
	if t, found, err := b.store.ConversationContext(ctx, titleKey(ev.Conversation)); err == nil && found && t.Text != "" {
		fmt.Fprintf(&s, "\nTitle: %s", t.Text)
	}
	fmt.Fprintf(&s, "\nConversation: `%s`", ev.Conversation)
	b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: s.String()})
}

func (b *Bridge) agentUse(ctx context.Context, log *zap.Logger, ev Event, cat *catalog, args []string) {
	if len(args) != 1 {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "Usage: `/agent use NAME`. Agents: " + joinQuoted(cat.agentNames) + "."})
		return
	}
	if !cat.isAdmin(ev.User) {
		b.metrics.refused("admin_only")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "Only flowbridge admins can switch a conversation's agent."})
		return
	}
	name := strings.ToLower(args[0])
	a, ok := cat.agents[name]
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf("There is no agent *%s*. Agents: %s.", name, joinQuoted(cat.agentNames))})
		return
	}
	if len(a.Channels) > 0 && !slices.Contains(a.Channels, ev.Channel) {
		b.metrics.refused("agent_channel")
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: fmt.Sprintf("The agent *%s* is not available in this channel, so this conversation cannot switch to it.", a.Name)})
		return
	}
	if cur, err := b.conversationAgent(ctx, cat, ev); err == nil && cur != nil && cur.Name == a.Name {
		b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Ephemeral: true, Text: fmt.Sprintf("This conversation already talks to *%s*; nothing changed.", a.Name)})
		return
	}
	if err := b.store.SetConversationAgent(ctx, ev.Conversation, a.Name); err != nil {
		log.Error("set agent", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgStoreFailed})
		return
	}
	log.Info("conversation agent switched", zap.String("agent", a.Name))
	text := fmt.Sprintf("This conversation now talks to *%s*; the next message starts a new session.", a.Name)
	if ev.Kind == KindCommand && ev.Parent == "" {
		// A slash command in a channel: the channel's new threads follow it.
		text += " New threads here will use it too."
	}
	b.tell(ctx, log, ev, Reply{Kind: ReplyInfo, Text: text})
}

func (b *Bridge) agentShare(ctx context.Context, log *zap.Logger, ev Event) {
	// In a channel, the user's own latest answer in its threads; else (a
	// thread, a DM, channel scope) the conversation's latest.
	text, ok, err := b.store.LastReply(ctx, shareKey(ev.Conversation, ev.User.ID))
	if err == nil && !ok {
		text, ok, err = b.store.LastReply(ctx, ev.Conversation)
	}
	if err != nil {
		log.Error("last reply", zap.Error(err))
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: msgStoreFailed})
		return
	}
	if !ok {
		b.tell(ctx, log, ev, Reply{Kind: ReplyError, Ephemeral: true, Text: "There is no agent reply to share in this conversation yet."})
		return
	}
	b.tell(ctx, log, ev, Reply{Kind: ReplyAgent, Text: text, Footer: "shared by " + displayName(ev.User)})
}
