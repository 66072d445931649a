package mrkdwn

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	// linkRE is the only shape a raw '<' may start in Convert's output: a
	// link Convert built to a web or mail URL.
	linkRE = regexp.MustCompile(`^<(?i:https?://|mailto:)[^<>|\s]*(?:\|[^<>\n]*)?>`)
	atRE   = regexp.MustCompile(`(?i)@(here|channel|everyone)`)
)

var fuzzSeeds = []string{
	"",
	"**bold** _it_ ~~s~~ `code` [l](https://x.io) ![i](https://x.io/i.png)",
	"<!here> <!channel> <!everyone> <@U123> <!subteam^S1> <#C1|x> @here",
	"[<!here>](https://x.io/|<@U1>) [x](javascript:1) <https://a.b/c>",
	"# H\n- a\n  * b\n1. c\n> q\n> > qq\n---\n|a|b|\n|-|-|\n|<x>|&y|\n",
	"```go\n<!here> && **x**\n```\n~~~\nunclosed",
	"&amp; &lt; &gt; & < >",
	"***a*** __b__ *a **b** c* _snake_case_ https://x.io/a_b_(c)).",
	"\r\n> \r\n>\n\\*x\\* `` a`b `` [a\\]b](<https://x y>)",
}

func FuzzConvert(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := Convert(md)
		checkCommon(t, "Convert", md, out)
		for i := 0; i < len(out); i++ {
			switch out[i] {
			case '<':
				m := linkRE.FindString(out[i:])
				if m == "" {
					t.Fatalf("Convert(%q) = %q: raw '<' at %d is no link Convert built", md, out, i)
				}
				i += len(m) - 1
			case '>':
				if i > 0 && out[i-1] != '\n' {
					t.Fatalf("Convert(%q) = %q: raw '>' at %d is no quote marker", md, out, i)
				}
			}
		}
	})
}

func FuzzPlainText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := PlainText(md)
		checkCommon(t, "PlainText", md, out)
		if strings.ContainsAny(out, "<>") {
			t.Fatalf("PlainText(%q) = %q: holds '<' or '>'", md, out)
		}
		if atRE.MatchString(out) {
			t.Fatalf("PlainText(%q) = %q: holds a bare @here, @channel or @everyone", md, out)
		}
	})
}

func FuzzSafeMarkdown(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := SafeMarkdown(md)
		checkCommon(t, "SafeMarkdown", md, out)
		if strings.Contains(out, "<") {
			t.Fatalf("SafeMarkdown(%q) = %q: holds '<'", md, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line[quotePrefixLen(line):], ">") {
				t.Fatalf("SafeMarkdown(%q) = %q: line %q holds a '>' that opens no quote", md, out, line)
			}
		}
		if atRE.MatchString(out) {
			t.Fatalf("SafeMarkdown(%q) = %q: holds a bare @here, @channel or @everyone", md, out)
		}
	})
}

// checkCommon asserts what holds for every renderer: no Slack control
// sequence, every '&' starts an entity, valid UTF-8 stays valid.
func checkCommon(t *testing.T, name, md, out string) {
	t.Helper()
	for _, seq := range []string{"<!", "<@", "<#"} {
		if strings.Contains(out, seq) {
			t.Fatalf("%s(%q) = %q: holds %q", name, md, out, seq)
		}
	}
	for i := range len(out) {
		if rest := out[i:]; out[i] == '&' && !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
			t.Fatalf("%s(%q) = %q: raw '&' at %d", name, md, out, i)
		}
	}
	if utf8.ValidString(md) && !utf8.ValidString(out) {
		t.Fatalf("%s(%q) = %q: invalid UTF-8 from valid input", name, md, out)
	}
}
