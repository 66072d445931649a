package discord

import (
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/flowbridge/flowbridge/bridge"
	"github.com/flowbridge/flowbridge/bridge/markdown"
	"github.com/flowbridge/flowbridge/internal/truncate"
)

// Discord's message limits.
const (
	maxContent       = 2000 // characters of content per message
	maxParts         = 5    // messages of one answer; past them it is cut (markdown.Cap)
	maxCustomID      = 100  // characters of a component's custom_id
	maxButtonLabel   = 80
	maxButtonsPerRow = 5
	maxRows          = 5
)

// message is one rendered Discord message.
type message struct {
	Content    string
	Components []discordgo.MessageComponent
	// File is uploaded with the message.
	File *bridge.File
}

// noMentions lets a message ping no one: Parse is an empty, non-nil list, so
// it is sent as "parse":[] (a nil list would be null, which Discord reads as
// its defaults). AI text can carry @everyone, @here, role and user mentions.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// render turns a reply into the messages that carry it: the Markdown text as
// is but for tables, which Discord does not render and which become aligned
// columns in a code block; split within Discord's limit with code fences
// balanced in every part (a long table goes on in the next part's block),
// the footer as a subtext line at the end, and the buttons as components of
// the last message. Lengths are counted in UTF-16 units, which is never less
// than the characters Discord counts.
func render(r bridge.Reply) []message {
	text, tail := renderedText(r)
	parts := markdown.Split(markdown.Cap(text, tail, maxContent, maxParts, markdown.UTF16Len), maxContent, markdown.UTF16Len)
	if len(parts) == 0 {
		parts = []string{"(empty reply)"}
	}
	msgs := make([]message, len(parts))
	for i, p := range parts {
		msgs[i].Content = p
	}
	msgs[len(msgs)-1].Components = components(r.Buttons)
	msgs[len(msgs)-1].File = r.File
	return msgs
}

// renderedText is the reply's text as render splits it, and the footer
// line that follows it.
func renderedText(r bridge.Reply) (text, tail string) {
	text = strings.TrimRight(monospaceTables(r.Text), " \t\r\n")
	if footer := footerLine(r.Footer); footer != "" {
		if text != "" {
			tail = "\n"
		}
		tail += footer
	}
	return text, tail
}

// cut reports whether render cuts the reply's text to maxParts messages.
func cut(r bridge.Reply) bool {
	text, tail := renderedText(r)
	return markdown.Cap(text, tail, maxContent, maxParts, markdown.UTF16Len) != text+tail
}

// monospaceTables replaces every Markdown table of md with its columns,
// aligned by display width, in a code block; cells lose their inline
// markup, which a code block would show as written.
func monospaceTables(md string) string {
	return markdown.ReplaceTables(md, func(t markdown.Table) string {
		return markdown.CodeBlock("", t.Columns(markdown.PlainInline))
	})
}

// footerLine renders the footer as Discord subtext ("-# "), which only
// works on a single line.
func footerLine(footer string) string {
	footer = strings.Join(strings.Fields(footer), " ")
	if footer == "" {
		return ""
	}
	return "-# " + truncate.Bytes(footer, 500)
}

// components lays buttons out in action rows. A button whose custom_id would
// be too long is left out: a press could not be routed back anyway. A Stop
// button whose entry key is too long stays, without the key: its press
// then stops whatever of the presser's runs in the conversation, which is
// better than no way to stop it from Discord.
func components(buttons []bridge.Button) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	var row discordgo.ActionsRow
	for _, b := range buttons {
		id := customID(b.Action)
		if len([]rune(id)) > maxCustomID && b.Action.ID == bridge.ActionStop {
			id = customID(bridge.Action{ID: bridge.ActionStop})
		}
		if len([]rune(id)) > maxCustomID || b.Action.ID == "" {
			continue
		}
		label := truncate.Bytes(strings.TrimSpace(b.Label), maxButtonLabel)
		if label == "" {
			label = b.Action.ID
		}
		row.Components = append(row.Components, discordgo.Button{Label: label, Style: buttonStyle(b.Style), CustomID: id})
		if len(row.Components) == maxButtonsPerRow {
			rows = append(rows, row)
			row = discordgo.ActionsRow{}
		}
	}
	if len(row.Components) > 0 {
		rows = append(rows, row)
	}
	return rows[:min(len(rows), maxRows)]
}

func buttonStyle(s string) discordgo.ButtonStyle {
	switch s {
	case "primary":
		return discordgo.PrimaryButton
	case "danger":
		return discordgo.DangerButton
	}
	return discordgo.SecondaryButton
}

// customID is what a button carries back: the action's ID and value.
func customID(a bridge.Action) string { return a.ID + ":" + a.Value }

// parseCustomID reverses customID; the ID never contains ':'.
func parseCustomID(s string) bridge.Action {
	id, value, _ := strings.Cut(s, ":")
	return bridge.Action{ID: id, Value: value}
}
