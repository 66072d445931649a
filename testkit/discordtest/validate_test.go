package discordtest

import (
	"slices"
	"testing"

	"github.com/bwmarrin/discordgo"
)

func TestPings(t *testing.T) {
	none := &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
	tests := []struct {
		name      string
		content   string
		am        *discordgo.MessageAllowedMentions
		src       Source
		repliedTo string
		want      []string
	}{
		{"parse nothing", "@everyone @here <@&1> <@2> <@!3>", none, SourceChannel, "", nil},
		{"channel default parses all", "@everyone <@&1> <@!3>", nil, SourceChannel, "", []string{"everyone", "role:1", "user:3"}},
		{"interaction default parses users", "@everyone <@&1> <@3>", nil, SourceInteraction, "", []string{"user:3"}},
		{"listed role", "<@&1> <@&2>", &discordgo.MessageAllowedMentions{Roles: []string{"2"}}, SourceChannel, "", []string{"role:2"}},
		{"reply pings by default", "x", nil, SourceChannel, "9", []string{"user:9"}},
		{"reply without replied_user", "x", none, SourceChannel, "9", nil},
		{"here", "@here", &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{"everyone"}}, SourceChannel, "", []string{"here"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pings(tt.content, tt.am, tt.src, tt.repliedTo); !slices.Equal(got, tt.want) {
				t.Errorf("pings(%q) = %q, want %q", tt.content, got, tt.want)
			}
		})
	}
}

func TestFormErrorBody(t *testing.T) {
	var fe formErrors
	fe.add("embeds.0.description", "BASE_TYPE_MAX_LENGTH", "Must be 4096 or fewer in length.")
	fe.add("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
	got := string(fe.err().body())
	want := `{"code":50035,"errors":{"content":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH","message":"Must be 2000 or fewer in length."}]},"embeds":{"0":{"description":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH","message":"Must be 4096 or fewer in length."}]}}}},"message":"Invalid Form Body"}`
	if got != want {
		t.Errorf("body = %s\nwant %s", got, want)
	}
}

// FuzzMessageBody feeds arbitrary bodies to the parser and rules every message route
// shares: they must refuse, never panic.
func FuzzMessageBody(f *testing.F) {
	for _, seed := range []string{
		`{"content":"hi","allowed_mentions":{"parse":[]}}`,
		`{"content":"@everyone","embeds":[{"title":"t","fields":[{"name":"n","value":"v"}]}],"allowed_mentions":{"parse":["users"],"users":["1"]}}`,
		`{"components":[{"type":1,"components":[{"type":2,"style":1,"custom_id":"share:1","label":"Share"}]}]}`,
		`{"components":[{"type":9}]}`,
		`{"message_reference":{"message_id":"1"},"flags":64,"sticker_ids":["1"]}`,
		`null`, `[]`, `{"content":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, aerr := parseMessageBody(raw)
		if aerr != nil {
			if aerr.status != 400 || len(aerr.body()) == 0 {
				t.Fatalf("parse error %v, want a 400 with a body", aerr)
			}
			return
		}
		var fe formErrors
		b.validate(&fe)
		_ = fe.err()
		for _, p := range pings(b.content, b.allowedMentions, SourceChannel, "") {
			if p == "" {
				t.Fatalf("empty ping from %q", b.content)
			}
		}
	})
}
