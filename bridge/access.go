package bridge

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
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

// ApproverProblem says what is wrong with one of a flow's approvers ("" if
// nothing): an approver is a person or a group of people, as an allow rule
// names them ("user:ID", "group:ID", "role:ID" or a bare ID), never
// "everyone" nor a channel.
func ApproverProblem(rule string) string {
	kind, id, qualified := strings.Cut(rule, ":")
	if !qualified {
		kind, id = "", rule
	}
	switch strings.ToLower(kind) {
	case "", "user", "group", "role":
	default:
		return fmt.Sprintf("%q: an approver is a user ID, \"user:ID\", \"group:ID\" or \"role:ID\"", rule)
	}
	switch {
	case strings.TrimSpace(id) == "" || strings.ContainsFunc(id, unicode.IsSpace):
		return fmt.Sprintf("%q needs an ID, without spaces", rule)
	case strings.EqualFold(id, "everyone"):
		return fmt.Sprintf("%q cannot approve: name the people who may (user, group or role IDs)", rule)
	}
	return ""
}

// approves reports whether ev's user may approve or refuse a run of f.
func approves(f *Flow, ev Event) bool {
	for _, r := range f.Approvers {
		kind, id, qualified := strings.Cut(r, ":")
		if !qualified {
			kind, id = "", r
		}
		switch strings.ToLower(kind) {
		case "":
			if id == ev.User.ID || slices.Contains(ev.User.Groups, id) {
				return true
			}
		case "user":
			if id == ev.User.ID {
				return true
			}
		case "group", "role":
			if slices.Contains(ev.User.Groups, id) {
				return true
			}
		}
	}
	return false
}

// approversText names who may approve a run of f, as IDs in code spans:
// shown, never mentioned, so that a refusal pings no one.
func approversText(f *Flow) string {
	return joinQuoted(f.Approvers)
}
