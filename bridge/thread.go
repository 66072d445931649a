package bridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Earlier is one message said before the one that starts a conversation,
// in the thread it starts in (see Platform.Earlier).
type Earlier struct {
	// Author is the writer's display name (their ID where it is unknown).
	Author string
	// Self marks the bot's own replies.
	Self bool
	// Text is the message as the agent should read it, mentions made plain.
	Text string
	// Files are the names of the files shared with the message.
	Files []string
	// LeftOut, set by the platform on the oldest message it returns, is
	// how many messages before it were not read.
	LeftOut int
}

// ThreadContext bounds what the agent hears of the thread a conversation
// starts in.
type ThreadContext struct {
	// Messages is how many earlier messages at most; 0 turns it off.
	Messages int
	// Chars bounds their text, names included.
	Chars int
}

// earlierBudget bounds the platform calls that read a thread, so a slow
// platform delays the answer by this much at most.
const earlierBudget = 10 * time.Second

// threadLead returns what the agent reads before the first message of a
// conversation's session about the thread it starts in ("" for nothing).
// Where the platform cannot say (rate limited, no access), the agent hears
// the message alone. hasSession says the conversation has a session already:
// then there is nothing to read.
func (b *Bridge) threadLead(ctx context.Context, log *zap.Logger, ev Event, hasSession bool) string {
	tc := b.cfg.ThreadContext
	if hasSession || tc.Messages <= 0 || ev.platform == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, earlierBudget)
	defer cancel()
	msgs, err := ev.platform.Earlier(ctx, ev, tc.Messages)
	if err != nil {
		log.Warn("thread not read; the agent gets the message without it", zap.Error(err))
		return ""
	}
	return formatEarlier(msgs, tc)
}

// formatEarlier writes the earlier messages for the agent, oldest first,
// within tc: the newest are kept when not all fit, and a line says how many
// were left out.
func formatEarlier(msgs []Earlier, tc ThreadContext) string {
	chars := tc.Chars
	unread := 0
	if len(msgs) > 0 {
		unread = msgs[0].LeftOut
	}
	if len(msgs) > tc.Messages {
		msgs = msgs[len(msgs)-tc.Messages:]
	}
	lines := make([]string, 0, len(msgs))
	used := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		line := earlierLine(msgs[i])
		if n := len(line); used+n > chars {
			if used == 0 {
				// The newest alone is over the budget: its start still helps.
				lines = append(lines, truncate.Bytes(strings.TrimSuffix(line, "\n"), chars)+"\n")
			}
			break
		}
		used += len(line)
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString(msgThreadLead)
	if left := len(msgs) - len(lines) + unread; left > 0 {
		fmt.Fprintf(&sb, msgThreadLeftOut, left)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		sb.WriteString(lines[i])
	}
	sb.WriteString(msgThreadEnd)
	return sb.String()
}

// earlierLine is one message as the agent reads it: "name: text", the
// bot's own marked, files named, on one line.
func earlierLine(m Earlier) string {
	author := plainMentions(oneLine(m.Author))
	if author == "" {
		author = msgThreadUnknown
	}
	if m.Self {
		author = fmt.Sprintf(msgThreadSelf, author)
	}
	text := plainMentions(oneLine(sanitize(m.Text)))
	if len(m.Files) > 0 {
		names := make([]string, len(m.Files))
		for i, f := range m.Files {
			names[i] = plainMentions(oneLine(f))
		}
		text = strings.TrimSpace(text + " " + fmt.Sprintf(msgThreadFiles, strings.Join(names, ", ")))
	}
	return "- " + author + ": " + text + "\n"
}

// oneLine joins a message's lines, so each message is one line of the lead.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// mentionDefuser keeps what others wrote from becoming a ping if the agent
// repeats it: Slack's <@U…>, <!here>, <#C…> and the @everyone and @here of
// both platforms get a word joiner, which no platform reads as a mention.
var mentionDefuser = strings.NewReplacer(
	"<@", "<\u2060@", "<!", "<\u2060!", "<#", "<\u2060#",
	"@everyone", "@\u2060everyone", "@here", "@\u2060here", "@channel", "@\u2060channel",
)

func plainMentions(s string) string { return mentionDefuser.Replace(s) }
