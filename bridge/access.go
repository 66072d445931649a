package bridge

import (
	"fmt"
	"slices"
	"strings"
)

// admits reports whether a flow's allow list admits the event's user, and the
// rule that did. Rules: "everyone"; "channel:ID"; "user:ID"; "group:ID" or
// "role:ID" (Slack user group, Discord role); a bare ID matches the user or any
// of their groups. A flow with no rules admits no one: running operations must
// be opened up on purpose.
func admits(f *Flow, ev Event) (rule string, ok bool) {
	for _, r := range f.Allow {
		kind, id, qualified := strings.Cut(r, ":")
		if !qualified {
			kind, id = "", r
		}
		switch strings.ToLower(kind) {
		case "":
			if strings.EqualFold(id, "everyone") || id == ev.User.ID || slices.Contains(ev.User.Groups, id) {
				return r, true
			}
		case "channel":
			if id == ev.Channel {
				return r, true
			}
		case "user":
			if id == ev.User.ID {
				return r, true
			}
		case "group", "role":
			if slices.Contains(ev.User.Groups, id) {
				return r, true
			}
		}
	}
	return "", false
}

// refusalText tells a refused user which rules would admit them.
func refusalText(f *Flow, _ string) string {
	if len(f.Allow) == 0 {
		return fmt.Sprintf("No one may run *%s* yet: it has no access rule. An admin can add one (`allow = [...]` in the flow's config).", f.Name)
	}
	return fmt.Sprintf("You may not run *%s*. It is open to: %s. Ask an admin if you need it.", f.Name, joinQuoted(f.Allow))
}

// isAdmin reports whether the user may change conversation settings.
func (c *catalog) isAdmin(u User) bool { return c.admins[u.ID] }
