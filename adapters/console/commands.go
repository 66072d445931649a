package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowbridge/flowbridge/bridge"
)

// What the console itself tells its user, in the core's voice (bridge/messages.go).
const (
	msgLineTooLong    = "That line is too long (%d bytes; the limit is %d). Please shorten it."
	msgUnknownCommand = "There is no command `/%s` here."
	msgDidYouMean     = " Did you mean `/%s`?"
	msgCommands       = "Commands: `/flow`, `/agent`, `/share`, `/stop` and `/help`; answer a confirmation with `y` or `n`. To send a line that starts with / as chat, start it with //."
	msgNothingToShare = "There is nothing to share: `/share` shares the last result that offers it."
	msgHowToTalk      = "Type a line to talk to the agent: this terminal is one conversation. `/help` lists the console's own commands."
	msgKeptForRestart = "flowbridge is restarting: this line is kept, and answered when it starts again with the same store."
	msgNotTaken       = "flowbridge could not take that line. Please try again; if it keeps happening, tell an admin."
	msgHelp           = "*Console commands*\n" +
		"• `/flow NAME key=value …`: run a flow; `/flow help` lists them\n" +
		"• `/agent …`: this conversation's agent; `/agent help` says more\n" +
		"• `/share`: share the last result that offers it\n" +
		"• `/stop`: stop the answer or flow under way\n" +
		"• `y` or `n`: answer a confirmation\n" +
		"• `/help`: this help\n" +
		"• `//text`: send \"/text\" to the agent as chat\n" +
		"Any other line is chat with the agent."
)

// The console's own command words, besides the core's (bridge.CommandFlow,
// bridge.CommandAgent).
const (
	commandShare = "share"
	commandStop  = "stop"
	commandHelp  = "help"
)

// commands are the words a mistyped command is compared with.
var commands = []string{bridge.CommandFlow, bridge.CommandAgent, commandShare, commandStop, commandHelp}

// unknownCommand is the answer to "/word" for a word the console does not know.
func unknownCommand(word string) bridge.Reply {
	shown := word
	if len(shown) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(shown[cut]) {
			cut--
		}
		shown = shown[:cut] + "…"
	}
	shown = strings.ReplaceAll(shown, "`", "'")
	text := fmt.Sprintf(msgUnknownCommand, shown)
	if near, ok := suggest(strings.ToLower(word)); ok {
		text += fmt.Sprintf(msgDidYouMean, near)
	}
	return bridge.Reply{Kind: bridge.ReplyError, Text: text + "\n" + msgCommands}
}

// suggest returns the command nearest to word, if it is at most two edits away.
func suggest(word string) (string, bool) {
	best, bestDist := "", 3
	for _, c := range commands {
		if d := editDistance(word, c, bestDist); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// editDistance is the Levenshtein distance between a and b in runes, or
// limit when it is limit or more.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], limit)
}

// splitCommand splits "/word args" after its slash into the word and the
// trimmed arguments.
func splitCommand(s string) (word, args string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}
