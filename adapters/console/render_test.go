package console

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowbridge/flowbridge/bridge"
)

func TestRenderMarkdown(t *testing.T) {
	tests := []struct {
		name, in, plain, ansi string
	}{
		{"core bold", "*Flows you can run*", "Flows you can run", "\x1b[1mFlows you can run\x1b[0m"},
		{"markdown bold", "Health check of **web1**", "Health check of web1", "Health check of \x1b[1mweb1\x1b[0m"},
		{"underscore bold", "__done__", "done", "\x1b[1mdone\x1b[0m"},
		{"italics", "_The agent sent an empty reply._", "The agent sent an empty reply.", "\x1b[3mThe agent sent an empty reply.\x1b[0m"},
		{"both", "***now***", "now", "\x1b[1;3mnow\x1b[0m"},
		{"nested", "**run _it_ now**", "run it now", "\x1b[1mrun \x1b[0m\x1b[1;3mit\x1b[0m\x1b[1m now\x1b[0m"},
		{"inline code", "Type `/flow help` now", "Type /flow help now", "Type \x1b[36m/flow help\x1b[0m now"},
		{"code keeps markers", "`*a* _b_ [c](d)`", "*a* _b_ [c](d)", "\x1b[36m*a* _b_ [c](d)\x1b[0m"},
		{"double backtick code", "`` a`b ``", "a`b", "\x1b[36ma`b\x1b[0m"},
		{"bold code", "*`deploy`*", "deploy", "\x1b[1;36mdeploy\x1b[0m"},
		{"link", "see [the docs](https://x.io/a_b_c) now", "see the docs (https://x.io/a_b_c) now", "see the docs (https://x.io/a_b_c) now"},
		{"link with parens", "[wiki](https://en.wikipedia.org/wiki/Go_(language))", "wiki (https://en.wikipedia.org/wiki/Go_(language))", "wiki (https://en.wikipedia.org/wiki/Go_(language))"},
		{"link text is url", "[https://x.io](https://x.io)", "https://x.io", "https://x.io"},
		{"bold link", "**[docs](https://x.io)**", "docs (https://x.io)", "\x1b[1mdocs\x1b[0m\x1b[1m (https://x.io)\x1b[0m"},
		{"image", "![a cat](https://x.io/c.png)", "a cat (https://x.io/c.png)", "a cat (https://x.io/c.png)"},
		{"autolink", "<https://x.io/_a_>", "https://x.io/_a_", "https://x.io/_a_"},
		{"bare url", "at https://x.io/_a_/*b* ok", "at https://x.io/_a_/*b* ok", "at https://x.io/_a_/*b* ok"},
		{"heading", "## Next *steps*", "Next steps", "\x1b[1mNext \x1b[0m\x1b[1msteps\x1b[0m"},
		{"heading closing hashes", "# Title ##", "Title", "\x1b[1mTitle\x1b[0m"},
		{"hashtag", "#general", "#general", "#general"},
		{"escapes", `\*not bold\* \_x\_`, "*not bold* _x_", "*not bold* _x_"},
		{"snake case", "snake_case_name and 2*3*4", "snake_case_name and 2*3*4", "snake_case_name and 2*3*4"},
		{"list items", "* one\n- two *bold*", "* one\n- two bold", "* one\n- two \x1b[1mbold\x1b[0m"},
		{"unmatched", "a * b ** c _ d ` e [f] (g)", "a * b ** c _ d ` e [f] (g)", "a * b ** c _ d ` e [f] (g)"},
		{"no span across lines", "*a\nb*", "*a\nb*", "*a\nb*"},
		{"fence", "Run:\n```sh\necho *x* _y_\n\n```\ndone", "Run:\n  echo *x* _y_\n  \ndone", "Run:\n  \x1b[36mecho *x* _y_\x1b[0m\n  \ndone"},
		{"tilde fence, longer closer", "~~~\n**a**\n~~~~", "  **a**", "  \x1b[36m**a**\x1b[0m"},
		{"unclosed fence", "```\n*a*", "  *a*", "  \x1b[36m*a*\x1b[0m"},
		{"inline triple backticks", "```a``` b", "a b", "\x1b[36ma\x1b[0m b"},
		{"strike", "~~restart web1~~ done", "r\u0336e\u0336s\u0336t\u0336a\u0336r\u0336t\u0336 w\u0336e\u0336b\u03361\u0336 done", "\x1b[9mrestart web1\x1b[0m done"},
		{"single tilde strike", "~no~", "n\u0336o\u0336", "\x1b[9mno\x1b[0m"},
		{"bold strike", "**~~x~~**", "x\u0336", "\x1b[1;9mx\x1b[0m"},
		{"tildes that strike nothing", "~/src and a ~ b and 1~~2 and ~~~x~~~", "~/src and a ~ b and 1~~2 and ~~~x~~~", "~/src and a ~ b and 1~~2 and ~~~x~~~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := renderMarkdown(tt.in, false); got != tt.plain {
				t.Errorf("renderMarkdown(%q, plain) = %q, want %q", tt.in, got, tt.plain)
			}
			if got := renderMarkdown(tt.in, true); got != tt.ansi {
				t.Errorf("renderMarkdown(%q, ansi) = %q, want %q", tt.in, got, tt.ansi)
			}
		})
	}
}

func TestRenderSanitizes(t *testing.T) {
	r := bridge.Reply{
		Kind:    bridge.ReplyAgent,
		Text:    "a\x1b]0;owned\x07b\rc\r\nd\x9b31m\xffe",
		Footer:  "f\x1b[2Jg",
		Buttons: []bridge.Button{{Label: "Share\x1b[5m", Action: bridge.Action{ID: bridge.ActionShare}}},
	}
	for _, ansi := range []bool{false, true} {
		out := render(r, ansi)
		if strings.IndexByte(out, '\r') >= 0 || strings.Contains(out, "\u009b") || strings.IndexByte(out, 0xff) >= 0 || strings.Count(out, "\x1b") != strings.Count(out, "\x1b[0m")*2 {
			t.Errorf("render(ansi=%v) = %q: control characters from the reply reached the terminal", ansi, out)
		}
	}
	if got, want := render(r, false), "agent:\n  a\uFFFD]0;owned\uFFFDb\uFFFDc\n  d\uFFFD31m\uFFFDe\n  — f\uFFFD[2Jg\n  [type /share to share\uFFFD[5m]\n"; got != want {
		t.Errorf("render = %q, want %q", got, want)
	}
}

// A line of markers with no closers costs linear time: without the search
// budget this takes minutes.
func TestRenderUnmatchedMarkersLinear(t *testing.T) {
	for _, unit := range []string{"*a ", "**a ", "_a ", "[a](", "[a]", "`a ``b ", "<https://a "} {
		line := strings.Repeat(unit, (1<<18)/len(unit))
		out := renderMarkdown(line, true)
		if len(out) < len(line) {
			t.Errorf("%q×%d: output shorter than input", unit, len(line)/len(unit))
		}
	}
}

func TestStyleAuto(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	tests := []struct {
		name  string
		style Style
		out   io.Writer
		want  bool
	}{
		{"auto, buffer", StyleAuto, &strings.Builder{}, false},
		{"auto, file", StyleAuto, file, false},
		{"auto, character device", StyleAuto, devNull, true}, // as a terminal is
		{"plain, character device", StylePlain, devNull, false},
		{"ansi, buffer", StyleANSI, &strings.Builder{}, true},
	}
	for _, tt := range tests {
		if got := tt.style.ansi(tt.out); got != tt.want {
			t.Errorf("%s: ansi = %v, want %v", tt.name, got, tt.want)
		}
	}
}

var (
	sgrRE    = regexp.MustCompile(`^\x1b\[([0-9;]*)m`)
	sgrAnyRE = regexp.MustCompile(`\x1b\[[0-9;]*m`)
)

// checkBalanced fails unless every escape sequence in out is an SGR one and
// every style started is reset before the next starts, before each line
// break and at the end.
func checkBalanced(t *testing.T, in, out string) {
	t.Helper()
	open := false
	for i := 0; i < len(out); i++ {
		switch out[i] {
		case '\x1b':
			m := sgrRE.FindStringSubmatch(out[i:])
			if m == nil {
				t.Fatalf("render(%q) = %q: escape at %d is no SGR sequence", in, out, i)
			}
			if reset := m[1] == "0"; reset != open {
				t.Fatalf("render(%q) = %q: unbalanced style at %d", in, out, i)
			}
			open = !open
			i += len(m[0]) - 1
		case '\n':
			if open {
				t.Fatalf("render(%q) = %q: style still open at the line break at %d", in, out, i)
			}
		}
	}
	if open {
		t.Fatalf("render(%q) = %q: style still open at the end", in, out)
	}
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"",
		"*Flows you can run*\n• `healthcheck`\n    `host` (required)",
		"Health check of **web1**: _all good_ [log](https://x.io/l_(1)) <https://x.io>",
		"```go\nfmt.Println(\"*x*\")\n```\n~~~\nunclosed **",
		"# H1 #\n***a*** __b__ *a **b** c* _snake_case_ https://x.io/a_b.",
		"\\*x\\* `` a`b `` [a\\]b](https://x y) ![i](u)",
		"\x1b[31mred\x1b[0m \r\n \x9b \xff\xfe",
		"*_*_*_*_*_*_*_*_*_*_x_*_*_*_*_*_*_*_*_*_*",
		"[[[[[a](b)](c)](d)](e)",
		"| a | 東京 |\n|--:|:-:|\n| `x\\|y` | **b** |\n| 1 |",
	} {
		f.Add(s, "footer *x*", false)
	}
	f.Fuzz(func(t *testing.T, text, footer string, buttons bool) {
		r := bridge.Reply{Kind: bridge.ReplyAgent, Text: text, Footer: footer}
		if buttons {
			r.Buttons = []bridge.Button{{Label: footer, Action: bridge.Action{ID: bridge.ActionConfirm}}}
		}
		plain, ansi := render(r, false), render(r, true)
		if strings.Contains(plain, "\x1b") {
			t.Fatalf("render(%q, plain) = %q holds an escape", text, plain)
		}
		checkBalanced(t, text, ansi)
		// Both styles show the same text, but for the long strokes plain
		// text overlays on struck characters, where ANSI crosses them out.
		unstruck := func(s string) string { return strings.ReplaceAll(s, "\u0336", "") }
		if stripped := sgrAnyRE.ReplaceAllString(ansi, ""); unstruck(stripped) != unstruck(plain) {
			t.Fatalf("render(%q): ANSI without its styles = %q, plain = %q", text, stripped, plain)
		}
	})
}
