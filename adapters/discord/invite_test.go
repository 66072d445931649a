package discord

import (
	"net/url"
	"testing"
)

func TestInviteURL(t *testing.T) {
	if Permissions != 309237730304 {
		t.Errorf("Permissions = %d, want 309237730304 (the documented value)", Permissions)
	}
	tests := []struct {
		guild string
		want  url.Values
	}{
		{"", url.Values{"client_id": {"42"}, "scope": {"bot applications.commands"}, "permissions": {"309237730304"}}},
		{"7", url.Values{"client_id": {"42"}, "scope": {"bot applications.commands"}, "permissions": {"309237730304"}, "guild_id": {"7"}, "disable_guild_select": {"true"}}},
	}
	for _, tt := range tests {
		got := InviteURL("42", tt.guild)
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("InviteURL(42, %q) = %q: %v", tt.guild, got, err)
		}
		if u.Scheme != "https" || u.Host != "discord.com" || u.Path != "/oauth2/authorize" {
			t.Errorf("InviteURL(42, %q) = %q, want https://discord.com/oauth2/authorize?…", tt.guild, got)
		}
		if q := u.Query(); q.Encode() != tt.want.Encode() {
			t.Errorf("InviteURL(42, %q) query = %v, want %v", tt.guild, q, tt.want)
		}
	}
}
