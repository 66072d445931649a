package slack

import (
	"strings"
)

// conversationKey names a Slack conversation for the core: a channel or DM,
// or a thread inside one when threadTS is set.
func conversationKey(team, channel, threadTS string) string {
	if threadTS == "" {
		return "slack/" + team + "/" + channel
	}
	return "slack/" + team + "/" + channel + "/" + threadTS
}

var unescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

// inboundText turns the text of a Slack message into what the agent reads:
// the bot's own mention removed, other mentions, channels and links made
// readable, and Slack's &amp; &lt; &gt; escapes undone.
func inboundText(s, botUserID string) string {
	var b strings.Builder
	b.Grow(len(s))
	for {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			b.WriteString(unescaper.Replace(s))
			break
		}
		end := strings.IndexByte(s[open:], '>')
		if end < 0 {
			b.WriteString(unescaper.Replace(s))
			break
		}
		b.WriteString(unescaper.Replace(s[:open]))
		t := entityText(s[open+1:open+end], botUserID)
		b.WriteString(t)
		s = s[open+end+1:]
		if t == "" {
			// "<@UBOT> hi" reads "hi", not " hi", mid-sentence too.
			s = strings.TrimPrefix(s, " ")
		}
	}
	return strings.TrimSpace(b.String())
}

// entityText renders one <…> entity of Slack's message format as plain text.
func entityText(e, botUserID string) string {
	target, label, hasLabel := strings.Cut(e, "|")
	label = unescaper.Replace(label)
	switch {
	case strings.HasPrefix(target, "@"):
		if botUserID != "" && target[1:] == botUserID {
			return ""
		}
		if hasLabel && label != "" {
			return "@" + label
		}
		return target
	case strings.HasPrefix(target, "#"):
		if hasLabel && label != "" {
			return "#" + label
		}
		return target
	case strings.HasPrefix(target, "!"):
		name := target[1:]
		if kind, id, ok := strings.Cut(name, "^"); ok {
			// <!subteam^S123|@team>, <!date^…|fallback>
			if hasLabel && label != "" {
				return label
			}
			if kind == "subteam" {
				id, _, _ = strings.Cut(id, "^")
				return "@" + id
			}
			return kind
		}
		if hasLabel && label != "" {
			return label
		}
		return "@" + name
	}
	target = unescaper.Replace(target)
	if !hasLabel || label == "" || label == target || "mailto:"+label == target {
		if l, ok := strings.CutPrefix(target, "mailto:"); ok {
			return l
		}
		return target
	}
	return label + " (" + target + ")"
}
