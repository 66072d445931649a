package main

import (
	"strings"
	"testing"
)

const slackFilesOn = `
[slack]
enabled = true
bot_token = "xoxb-1"
app_token = "xapp-1"
files = true
`

func TestCheckConfigNamesWhatFilesNeed(t *testing.T) {
	tests := []struct {
		name, rest string
		want, not  []string
	}{
		{"off", discordOn, nil, []string{"needs:"}},
		{"slack", slackFilesOn, []string{"needs: slack.files", "files:read, files:write"}, []string{"discord.files"}},
		{"discord", discordOn + "files = true\n", []string{"needs: discord.files", "Attach Files"}, []string{"slack.files"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, nil, "", "check-config", "-config", writeFile(t, testConfig("", tt.rest)))
			if err != nil {
				t.Fatalf("check-config = %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("check-config output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("check-config output has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestFileKeysRanges(t *testing.T) {
	for _, tt := range []struct {
		rest, want string
	}{
		{"[bridge]\nmax_files = 0\n", "bridge.max_files: 0 is out of range: allowed 1 to 20"},
		{"[bridge]\nmax_file_bytes = 20000000\n", "bridge.max_file_bytes: 20000000 is out of range"},
		{"[bridge]\nfile_reply_over = 100\n", "bridge.file_reply_over: 100 is out of range: allowed 0 (never) or 500 to 1000000"},
	} {
		_, err := parseConfig([]byte(testConfig("", tt.rest)), mapEnv(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseConfig(%q) = %v, want %q", tt.rest, err, tt.want)
		}
	}
	cfg, err := parseConfig([]byte(testConfig("", "[bridge]\nfile_reply_over = 0\nmax_files = 3\n")), mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.bridgeConfig().Files; got.ReplyOver != 0 || got.MaxFiles != 3 || got.MaxFileBytes != 100000 {
		t.Errorf("bridgeConfig().Files = %+v, want never as files, 3 files of 100000 bytes", got)
	}
}

func TestDiscordInvitePrintsTheUserInstallLink(t *testing.T) {
	text := testConfig("", "\n[discord]\nenabled = true\ntoken = \"a.b.c\"\napplication_id = \"900000000000000001\"\nuser_install = true\n")
	out, errOut, err := runCmd(t, nil, "", "discord-invite", "-config", writeFile(t, text))
	if err != nil {
		t.Fatalf("discord-invite = %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "scope=bot+applications.commands") ||
		lines[1] != "https://discord.com/oauth2/authorize?client_id=900000000000000001&integration_type=1&scope=applications.commands" {
		t.Errorf("discord-invite with user_install = %q, want the server invite, then the user install link", out)
	}
	out, _, err = runCmd(t, nil, "", "check-config", "-config", writeFile(t, text))
	if err != nil || !strings.Contains(out, "needs: discord.user_install") {
		t.Errorf("check-config with user_install = %v\n%s, want what it needs named", err, out)
	}
	_, err = parseConfig([]byte(text+"guild_ids = [\"1\"]\n"), mapEnv(nil))
	if err == nil || !strings.Contains(err.Error(), "discord.user_install") {
		t.Errorf("user_install with guild_ids = %v, want it refused", err)
	}
}
