package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Message limits (message.mdx).
const (
	MaxContent         = 2000
	MaxEmbeds          = 10
	MaxEmbedTotal      = 6000
	MaxEmbedTitle      = 256
	MaxEmbedDesc       = 4096
	MaxEmbedFields     = 25
	MaxFieldName       = 256
	MaxFieldValue      = 1024
	MaxFooterText      = 2048
	MaxAuthorName      = 256
	MaxActionRows      = 5
	MaxRowButtons      = 5
	MaxCustomID        = 100
	MaxButtonLabel     = 80
	MaxAutocompleteOpt = 25
)

// msgBody is a message body (create, edit, webhook, interaction data) with presence of each
// field kept, since an edit changes only what it names.
type msgBody struct {
	has             map[string]bool
	content         string
	embeds          []*discordgo.MessageEmbed
	rawComponents   json.RawMessage
	components      []discordgo.MessageComponent
	allowedMentions *discordgo.MessageAllowedMentions
	reference       *discordgo.MessageReference
	flags           discordgo.MessageFlags
	stickers        []string
	choices         []*discordgo.ApplicationCommandOptionChoice
	files           []Attachment // uploaded as multipart files[n]
	nonce           string       // a number is kept as its decimal text
	enforceNonce    bool
}

// MaxNonceLength is the longest nonce Discord takes on a message.
const MaxNonceLength = 25

func errBadJSON(err error) *apiError {
	return &apiError{status: http.StatusBadRequest, code: 50109, message: "The request body contains invalid JSON.",
		fields: []fieldError{{path: "_json", code: "INVALID_JSON", message: err.Error()}}}
}

// parseMessageBody decodes raw; a JSON null or absent body is an empty message.
func parseMessageBody(raw []byte) (msgBody, *apiError) {
	b := msgBody{has: map[string]bool{}}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return b, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return b, errBadJSON(err)
	}
	var fe formErrors
	decode := func(key string, v any) {
		r, ok := fields[key]
		if !ok {
			return
		}
		b.has[key] = true
		if string(r) == "null" {
			return
		}
		if err := json.Unmarshal(r, v); err != nil {
			fe.add(key, "BASE_TYPE_INVALID", "invalid: %v", err)
		}
	}
	decode("content", &b.content)
	decode("embeds", &b.embeds)
	decode("allowed_mentions", &b.allowedMentions)
	decode("message_reference", &b.reference)
	decode("flags", &b.flags)
	decode("sticker_ids", &b.stickers)
	decode("choices", &b.choices)
	if r, ok := fields["nonce"]; ok && string(r) != "null" {
		b.has["nonce"] = true
		var n json.Number
		if err := json.Unmarshal(r, &b.nonce); err != nil {
			if err := json.Unmarshal(r, &n); err != nil {
				fe.add("nonce", "BASE_TYPE_INVALID", "must be a string or an integer")
			}
			b.nonce = n.String()
		}
		if len(b.nonce) > MaxNonceLength {
			fe.add("nonce", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxNonceLength)
		}
	}
	decode("enforce_nonce", &b.enforceNonce)
	if r, ok := fields["components"]; ok {
		b.has["components"] = true
		if string(r) != "null" {
			b.rawComponents = r
			var list []json.RawMessage
			if err := json.Unmarshal(r, &list); err != nil {
				fe.add("components", "BASE_TYPE_INVALID", "must be a list: %v", err)
			}
			for i, c := range list {
				mc, err := discordgo.MessageComponentFromJSON(c)
				if err != nil {
					fe.add(fmt.Sprintf("components.%d", i), "UNION_TYPE_CHOICES", "%v", err)
					continue
				}
				b.components = append(b.components, mc)
			}
		}
	}
	return b, fe.err()
}

// hasVisible reports whether the body would show anything.
func (b msgBody) hasVisible() bool {
	return b.content != "" || len(b.embeds) > 0 || len(b.components) > 0 || len(b.stickers) > 0 || len(b.files) > 0
}

// validate checks limits and the fake's allowed_mentions rule. Flags are checked by callers,
// which know what each route allows.
func (b msgBody) validate(fe *formErrors) {
	if n := utf8.RuneCountInString(b.content); n > MaxContent {
		fe.add("content", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length. (got %d)", MaxContent, n)
	}
	validateEmbeds(b.embeds, fe)
	validateComponents(b.rawComponents, b.flags, fe)
	if (b.content != "" || len(b.embeds) > 0) && b.allowedMentions == nil {
		fe.add("allowed_mentions", "DISCORDTEST_REQUIRED",
			"discordtest: every message with content or embeds must set allowed_mentions (use {\"parse\":[]}), else Discord pings with its defaults")
	}
	if am := b.allowedMentions; am != nil {
		if slices.Contains(am.Parse, discordgo.AllowedMentionTypeUsers) && len(am.Users) > 0 {
			fe.add("allowed_mentions", "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", "parse:[\"users\"] and users are mutually exclusive.")
		}
		if slices.Contains(am.Parse, discordgo.AllowedMentionTypeRoles) && len(am.Roles) > 0 {
			fe.add("allowed_mentions", "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", "parse:[\"roles\"] and roles are mutually exclusive.")
		}
		for _, p := range am.Parse {
			if !slices.Contains([]discordgo.AllowedMentionType{"users", "roles", "everyone"}, p) {
				fe.add("allowed_mentions.parse", "BASE_TYPE_CHOICES", "Value must be one of ('roles', 'users', 'everyone').")
			}
		}
		if len(am.Users) > 100 || len(am.Roles) > 100 {
			fe.add("allowed_mentions", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length.")
		}
	}
}

func validateEmbeds(embeds []*discordgo.MessageEmbed, fe *formErrors) {
	if len(embeds) > MaxEmbeds {
		fe.add("embeds", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxEmbeds)
	}
	total := 0
	check := func(path, s string, limit int) {
		n := utf8.RuneCountInString(s)
		total += n
		if n > limit {
			fe.add(path, "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", limit)
		}
	}
	for i, e := range embeds {
		if e == nil {
			continue
		}
		p := fmt.Sprintf("embeds.%d.", i)
		check(p+"title", e.Title, MaxEmbedTitle)
		check(p+"description", e.Description, MaxEmbedDesc)
		if e.Footer != nil {
			check(p+"footer.text", e.Footer.Text, MaxFooterText)
		}
		if e.Author != nil {
			check(p+"author.name", e.Author.Name, MaxAuthorName)
		}
		if len(e.Fields) > MaxEmbedFields {
			fe.add(p+"fields", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxEmbedFields)
		}
		for j, f := range e.Fields {
			if f == nil {
				continue
			}
			fp := fmt.Sprintf("%sfields.%d.", p, j)
			if f.Name == "" {
				fe.add(fp+"name", "BASE_TYPE_REQUIRED", "This field is required")
			}
			if f.Value == "" {
				fe.add(fp+"value", "BASE_TYPE_REQUIRED", "This field is required")
			}
			check(fp+"name", f.Name, MaxFieldName)
			check(fp+"value", f.Value, MaxFieldValue)
		}
	}
	if total > MaxEmbedTotal {
		fe.add("embeds", "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of %d (got %d)", MaxEmbedTotal, total)
	}
}

// rawComponent is the subset of a component the limits concern.
type rawComponent struct {
	Type       discordgo.ComponentType `json:"type"`
	CustomID   string                  `json:"custom_id"`
	Label      string                  `json:"label"`
	Style      discordgo.ButtonStyle   `json:"style"`
	URL        string                  `json:"url"`
	Components []rawComponent          `json:"components"`
}

func validateComponents(raw json.RawMessage, flags discordgo.MessageFlags, fe *formErrors) {
	if len(raw) == 0 {
		return
	}
	var rows []rawComponent
	if err := json.Unmarshal(raw, &rows); err != nil {
		return // reported by parseMessageBody
	}
	if flags&discordgo.MessageFlagsIsComponentsV2 != 0 {
		return // layout components have their own rules, which the bridge does not use
	}
	if len(rows) > MaxActionRows {
		fe.add("components", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxActionRows)
	}
	for i, row := range rows {
		p := fmt.Sprintf("components.%d", i)
		if row.Type != discordgo.ActionsRowComponent {
			fe.add(p+".type", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "top-level components must be action rows (type 1), got %d", row.Type)
			continue
		}
		if len(row.Components) == 0 || len(row.Components) > MaxRowButtons {
			fe.add(p+".components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and %d in length.", MaxRowButtons)
		}
		for j, c := range row.Components {
			cp := fmt.Sprintf("%s.components.%d", p, j)
			if c.Type != discordgo.ButtonComponent {
				if len(row.Components) > 1 {
					fe.add(cp, "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "a select menu must be alone in its row")
				}
				continue
			}
			if utf8.RuneCountInString(c.Label) > MaxButtonLabel {
				fe.add(cp+".label", "BASE_TYPE_MAX_LENGTH", "Must be %d or fewer in length.", MaxButtonLabel)
			}
			switch c.Style {
			case discordgo.LinkButton:
				if c.URL == "" || c.CustomID != "" {
					fe.add(cp, "BUTTON_COMPONENT_INVALID", "a link button needs url and no custom_id")
				}
			case discordgo.PrimaryButton, discordgo.SecondaryButton, discordgo.SuccessButton, discordgo.DangerButton:
				if c.CustomID == "" || utf8.RuneCountInString(c.CustomID) > MaxCustomID {
					fe.add(cp+".custom_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and %d in length.", MaxCustomID)
				}
			case discordgo.PremiumButton:
			default:
				fe.add(cp+".style", "BASE_TYPE_CHOICES", "unknown button style %d", c.Style)
			}
		}
	}
	// custom_ids must be unique within a message.
	seen := map[string]bool{}
	for _, row := range rows {
		for _, c := range row.Components {
			if c.CustomID == "" {
				continue
			}
			if seen[c.CustomID] {
				fe.add("components", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated (%q)", c.CustomID)
			}
			seen[c.CustomID] = true
		}
	}
}

var (
	userMention = regexp.MustCompile(`<@!?(\d+)>`)
	roleMention = regexp.MustCompile(`<@&(\d+)>`)
)

// defaultParse is what Discord parses when allowed_mentions is absent: everything for
// channel messages, users only for interaction responses and webhooks.
func defaultParse(src Source) []discordgo.AllowedMentionType {
	if src == SourceChannel {
		return []discordgo.AllowedMentionType{"users", "roles", "everyone"}
	}
	return []discordgo.AllowedMentionType{"users"}
}

// pings works out whom content would notify under am (nil: Discord's default for src).
// repliedTo is the author of the referenced message, which a reply pings unless
// allowed_mentions says replied_user false.
func pings(content string, am *discordgo.MessageAllowedMentions, src Source, repliedTo string) []string {
	parse := defaultParse(src)
	var users, roles []string
	repliedUser := true
	if am != nil {
		parse, users, roles, repliedUser = am.Parse, am.Users, am.Roles, am.RepliedUser
	}
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if slices.Contains(parse, discordgo.AllowedMentionTypeEveryone) {
		if strings.Contains(content, "@everyone") {
			add("everyone")
		}
		if strings.Contains(content, "@here") {
			add("here")
		}
	}
	for _, m := range roleMention.FindAllStringSubmatch(content, -1) {
		if slices.Contains(parse, discordgo.AllowedMentionTypeRoles) || slices.Contains(roles, m[1]) {
			add("role:" + m[1])
		}
	}
	for _, m := range userMention.FindAllStringSubmatch(content, -1) {
		if slices.Contains(parse, discordgo.AllowedMentionTypeUsers) || slices.Contains(users, m[1]) {
			add("user:" + m[1])
		}
	}
	if repliedTo != "" && repliedUser {
		add("user:" + repliedTo)
	}
	return out
}
