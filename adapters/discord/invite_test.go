package discord

import (
	"net/url"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"
)

func TestInviteURL(t *testing.T) {
	if BasePermissions != 274877991936 {
		t.Errorf("BasePermissions = %d, want 274877991936 (the documented value)", BasePermissions)
	}
	const app = "42"
	tests := []struct {
		name  string
		cfg   Config
		guild string
		want  url.Values
	}{
		{"no threads started", Config{ApplicationID: app}, "",
			url.Values{"client_id": {app}, "scope": {"bot applications.commands"}, "permissions": {"274877991936"}}},
		{"start_threads asks for Create Public Threads", Config{ApplicationID: app, StartThreads: true}, "",
			url.Values{"client_id": {app}, "scope": {"bot applications.commands"}, "permissions": {"309237730304"}}},
		{"files asks for Attach Files", Config{ApplicationID: app, Files: true}, "",
			url.Values{"client_id": {app}, "scope": {"bot applications.commands"}, "permissions": {"274878024704"}}},
		{"guild preselected", Config{ApplicationID: app}, "7",
			url.Values{"client_id": {app}, "scope": {"bot applications.commands"}, "permissions": {"274877991936"}, "guild_id": {"7"}, "disable_guild_select": {"true"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InviteURL(tt.cfg, tt.guild)
			if err != nil {
				t.Fatalf("InviteURL(%+v, %q) = %v", tt.cfg, tt.guild, err)
			}
			u, err := url.Parse(got)
			if err != nil {
				t.Fatalf("InviteURL(%+v, %q) = %q: %v", tt.cfg, tt.guild, got, err)
			}
			if u.Scheme != "https" || u.Host != "discord.com" || u.Path != "/oauth2/authorize" {
				t.Errorf("InviteURL(%+v, %q) = %q, want https://discord.com/oauth2/authorize?…", tt.cfg, tt.guild, got)
			}
			if q := u.Query(); q.Encode() != tt.want.Encode() {
				t.Errorf("InviteURL(%+v, %q) query = %v, want %v", tt.cfg, tt.guild, q, tt.want)
			}
		})
	}
}

func TestPermissionsFollowConfig(t *testing.T) {
	if p := Permissions(Config{}); p&discordgo.PermissionCreatePublicThreads != 0 {
		t.Errorf("Permissions(start_threads = false) = %d, want no Create Public Threads", p)
	}
	if p := Permissions(Config{StartThreads: true}); p&discordgo.PermissionCreatePublicThreads == 0 {
		t.Errorf("Permissions(start_threads = true) = %d, want Create Public Threads", p)
	}
	for _, cfg := range []Config{{}, {StartThreads: true}} {
		if p := Permissions(cfg); p&BasePermissions != BasePermissions {
			t.Errorf("Permissions(%+v) = %d lacks part of BasePermissions %d", cfg, p, BasePermissions)
		}
	}
}

func TestInviteURLRefuses(t *testing.T) {
	tests := []struct {
		cfg   Config
		guild string
		want  string
	}{
		{Config{}, "", "discord.application_id: required"},
		{Config{ApplicationID: "app"}, "", "is not a Discord ID"},
		{Config{ApplicationID: "42"}, "my server", `guild "my server" is not a Discord ID`},
	}
	for _, tt := range tests {
		got, err := InviteURL(tt.cfg, tt.guild)
		if err == nil || !strings.Contains(err.Error(), tt.want) || got != "" {
			t.Errorf("InviteURL(%+v, %q) = %q, %v; want an error containing %q", tt.cfg, tt.guild, got, err, tt.want)
		}
	}
}
