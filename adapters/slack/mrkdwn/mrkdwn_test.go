package mrkdwn

import (
	"strings"
	"testing"
)

func TestConvert(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{name: "empty", md: "", want: ""},
		{name: "plain text", md: "hello world", want: "hello world"},
		{name: "bold stars", md: "a **b** c", want: "a *b* c"},
		{name: "bold underscores", md: "a __b__ c", want: "a *b* c"},
		{name: "italic star", md: "a *b* c", want: "a _b_ c"},
		{name: "italic underscore", md: "a _b_ c", want: "a _b_ c"},
		{name: "bold italic", md: "***x***", want: "*_x_*"},
		{name: "italic inside bold", md: "**a *b* c**", want: "*a _b_ c*"},
		{name: "bold inside italic", md: "*a **b** c*", want: "_a *b* c_"},
		{name: "strike", md: "~~old~~ new", want: "~old~ new"},
		{name: "snake case untouched", md: "use my_var_name here", want: "use my_var_name here"},
		{name: "lone stars stay", md: "2 * 3 * 4", want: "2 * 3 * 4"},
		{name: "unclosed bold stays", md: "**open", want: "**open"},
		{name: "escaped star", md: `\*not italic\*`, want: "*not italic*"},
		{name: "inline code not converted", md: "run `**x** <y> & z`", want: "run `**x** &lt;y&gt; &amp; z`"},
		{name: "double backtick code", md: "``a ` b``", want: "`a ` b`"},
		{name: "link", md: "see [docs](https://example.com/a?b=1&c=2)", want: "see <https://example.com/a?b=1&amp;c=2|docs>"},
		{name: "link with title", md: `[t](http://x.io "T")`, want: "<http://x.io|t>"},
		{name: "link with parens in url", md: "[w](https://en.wikipedia.org/wiki/Go_(language))", want: "<https://en.wikipedia.org/wiki/Go_(language)|w>"},
		{name: "link formatting stripped from label", md: "[**bold** `c`](https://x.io)", want: "<https://x.io|bold c>"},
		{name: "mailto link", md: "[mail](mailto:a@b.c)", want: "<mailto:a@b.c|mail>"},
		{name: "javascript link keeps text only", md: "[click](javascript:alert(1))", want: "click"},
		{name: "relative link keeps text only", md: "[file](./a.md)", want: "file"},
		{name: "slack scheme keeps text only", md: "[x](slack://channel?id=C1)", want: "x"},
		{name: "empty label", md: "[](https://x.io)", want: "<https://x.io>"},
		{name: "pipe and angle in label", md: "[a|b>c](https://x.io)", want: "<https://x.io|a¦b&gt;c>"},
		{name: "pipe and angle in url", md: "[a](https://x.io/|<!here>)", want: "<https://x.io/%7C%3C!here%3E|a>"},
		{name: "mention in label", md: "[<!channel> @here](https://x.io)", want: "<https://x.io|&lt;!channel&gt; @\u2060here>"},
		{name: "image", md: "![diagram](https://x.io/d.png)", want: "<https://x.io/d.png|diagram>"},
		{name: "image with bad url", md: "![alt](data:image/png;base64,xx)", want: "alt"},
		{name: "autolink", md: "<https://x.io/a_b>", want: "<https://x.io/a_b>"},
		{name: "bare url kept with underscores", md: "go to https://x.io/a_b_c.", want: "go to https://x.io/a_b_c."},
		{name: "bare url ampersand escaped", md: "https://x.io/?a=1&b=2", want: "https://x.io/?a=1&amp;b=2"},
		{name: "heading", md: "# Title", want: "*Title*"},
		{name: "heading with bold", md: "## The **plan** ##", want: "*The plan*"},
		{name: "heading level six", md: "###### small", want: "*small*"},
		{name: "seven hashes is text", md: "####### x", want: "####### x"},
		{name: "setext heading", md: "Title\n=====\ntext", want: "*Title*\ntext"},
		{name: "bullets", md: "- a\n* b\n+ c", want: "• a\n• b\n• c"},
		{name: "nested bullets keep indentation", md: "- a\n  - b\n    - c", want: "• a\n  • b\n    • c"},
		{name: "task list", md: "- [ ] todo\n- [x] done", want: "• ☐ todo\n• ☑ done"},
		{name: "ordered list", md: "1. one\n2. **two**\n10) ten", want: "1. one\n2. *two*\n10) ten"},
		{name: "quote", md: "> a **b**\n> c", want: "> a *b*\n> c"},
		{name: "nested quote flattened", md: "> > deep", want: "> deep"},
		{name: "empty quote line", md: ">", want: ">"},
		{name: "quote marker not at line start escaped", md: "a > b", want: "a &gt; b"},
		{name: "thematic break", md: "a\n\n---\n\nb", want: "a\n\n" + ruleLine + "\n\nb"},
		{name: "fence verbatim", md: "```go\nx := **y** < z\n```", want: "```\nx := **y** &lt; z\n```"},
		{name: "fence tilde", md: "~~~\n_a_\n~~~", want: "```\n_a_\n```"},
		{name: "indented fence in list", md: "1. run:\n   ```sh\n   ls\n     -l\n   ```", want: "1. run:\n```\nls\n  -l\n```"},
		{name: "unclosed fence runs to end", md: "```\ncode\n# not heading", want: "```\ncode\n# not heading\n```"},
		{name: "table", md: "| a | bb |\n|---|:--:|\n| 1 | 2 |\n| **long** | x |", want: "```\na    | bb\n-----+---\n1    | 2\nlong | x\n```"},
		{name: "table right aligned", md: "|n|v|\n|-|-:|\n|a|1|\n|b|100|", want: "```\nn |   v\n--+----\na |   1\nb | 100\n```"},
		{name: "table escaped pipe and specials", md: "|a|b|\n|-|-|\n|x\\|y|<@U1>|", want: "```\na   | b\n----+------\nx|y | &lt;@U1&gt;\n```"},
		{name: "pipe without delimiter row is text", md: "a | b\nc | d", want: "a | b\nc | d"},
		{name: "special mentions escaped", md: "<!here> <!channel> <!everyone> <@U123> <!subteam^S1> <#C1|general> <!date^1|x>", want: "&lt;!here&gt; &lt;!channel&gt; &lt;!everyone&gt; &lt;@U123&gt; &lt;!subteam^S1&gt; &lt;#C1|general&gt; &lt;!date^1|x&gt;"},
		{name: "entities escaped again", md: "&lt;!here&gt; &amp;", want: "&amp;lt;!here&amp;gt; &amp;amp;"},
		{name: "html escaped", md: "<b>hi</b>", want: "&lt;b&gt;hi&lt;/b&gt;"},
		{name: "at words neutralised", md: "@here @CHANNEL @everyone @someone", want: "@\u2060here @\u2060CHANNEL @\u2060everyone @someone"},
		{name: "at here in code kept", md: "`@here`", want: "`@here`"},
		{name: "crlf", md: "**a**\r\n- b", want: "*a*\n• b"},
		{name: "hard break backslash", md: "line\\\nnext", want: "line\nnext"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Convert(tt.md); got != tt.want {
				t.Errorf("Convert(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{name: "markup dropped", md: "# Hi\n**a** _b_ ~~c~~ `d`", want: "Hi\na b c d"},
		{name: "link", md: "[docs](https://x.io?a&b)", want: "docs (https://x.io?a&amp;b)"},
		{name: "link label equals url", md: "[https://x.io](https://x.io)", want: "https://x.io"},
		{name: "autolink", md: "<https://x.io>", want: "https://x.io"},
		{name: "bad link", md: "[x](javascript:1)", want: "x"},
		{name: "image", md: "![alt](https://x.io/a.png)", want: "alt (https://x.io/a.png)"},
		{name: "lists", md: "- a\n1. b", want: "• a\n1. b"},
		{name: "quote marker dropped", md: "> q", want: "q"},
		{name: "code block kept without fences", md: "```js\na<b\n```", want: "a&lt;b"},
		{name: "table", md: "|a|b|\n|-|-|\n|1|2|", want: "a | b\n1 | 2"},
		{name: "mentions", md: "<!here> @here `@channel`", want: "&lt;!here&gt; @\u2060here @\u2060channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlainText(tt.md); got != tt.want {
				t.Errorf("PlainText(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

func TestSafeMarkdown(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{name: "markdown kept", md: "# T\n**b** [l](https://x.io) | a |", want: "# T\n**b** [l](https://x.io) | a |"},
		{name: "special mentions", md: "<!here> <@U1> <#C1> <!subteam^S1>", want: "&lt;!here&gt; &lt;@U1&gt; &lt;#C1&gt; &lt;!subteam^S1&gt;"},
		{name: "ampersand", md: "a & b &amp;", want: "a &amp; b &amp;amp;"},
		{name: "quote kept", md: "> a > b\n  > > c\n    > code", want: "> a &gt; b\n  > > c\n    &gt; code"},
		{name: "code escaped too", md: "```\na<b\n```", want: "```\na&lt;b\n```"},
		{name: "at words", md: "@Here @channel @everyone!", want: "@\u2060Here @\u2060channel @\u2060everyone!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SafeMarkdown(tt.md); got != tt.want {
				t.Errorf("SafeMarkdown(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a & b", "a &amp; b"},
		{"<!here>", "&lt;!here&gt;"},
		{"&amp;", "&amp;amp;"},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestConvertNeverLinksUnsafeSchemes(t *testing.T) {
	for _, url := range []string{"javascript:x", "JaVaScRiPt:x", "data:text/html,x", "slack://open", "ftp://x", "//x.io", "vbscript:x"} {
		md := "[t](" + url + ") <" + url + ">"
		if got := Convert(md); strings.Contains(got, "<") {
			t.Errorf("Convert(%q) = %q, want no link", md, got)
		}
	}
}

// TestUnmatchedOpenersBecomeText: a line of unmatched openers keeps the
// markup before it and comes out as escaped text, however long it is.
func TestUnmatchedOpenersBecomeText(t *testing.T) {
	for _, junk := range []string{"*a ", "[", "![<", "[a]("} {
		line := "**bold** [x](https://e.com) " + strings.Repeat(junk, 200000/len(junk))
		got := Convert(line)
		if want := "*bold* <https://e.com|x> "; !strings.HasPrefix(got, want) {
			t.Errorf("%q junk: output starts %q, want %q", junk, got[:40], want)
		}
		if strings.Count(got, "<") != 1 {
			t.Errorf("%q junk: %d '<' in the output, want only the link's", junk, strings.Count(got, "<"))
		}
	}
}

func TestRawText(t *testing.T) {
	tests := map[string]string{
		"a & b <c>":                  "a & b <c>",
		"<!here> <@U1> <#C1> <http>": "<\u2060!here> <\u2060@U1> <\u2060#C1> <http>",
		"@Here and @CHANNEL":         "@\u2060Here and @\u2060CHANNEL",
		"mail@here.example":          "mail@\u2060here.example",
	}
	for in, want := range tests {
		if got := RawText(in); got != want {
			t.Errorf("RawText(%q) = %q, want %q", in, got, want)
		}
	}
}
