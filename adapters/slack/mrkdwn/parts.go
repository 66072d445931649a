package mrkdwn

import (
	"strings"

	"github.com/flowbridge/flowbridge/bridge/markdown"
)

// Parts splits Markdown with markdown.Split and renders each part with
// render (Convert, PlainText or SafeMarkdown), so that every rendered part
// is at most limit UTF-16 units: Convert's 3,000 for a section block,
// SafeMarkdown's 12,000 for markdown blocks. UTF-16 units are never fewer
// than characters, whichever way Slack counts. Splitting before rendering
// keeps links and entities whole and fences balanced; a part whose
// rendering grew past limit (escaping, table padding) is split again,
// smaller. Only if that cannot help is the rendered text itself cut, which
// may break a link or entity in two but never forms a control sequence.
// Blank renderings are dropped.
func Parts(md string, limit int, render func(string) string) []string {
	var out []string
	for _, p := range markdown.Split(md, limit, markdown.UTF16Len) {
		out = append(out, fit(p, limit, render)...)
	}
	return out
}

// fit renders the Markdown part p, splitting it while the rendering is
// too long. Each round splits at a budget below p's own length, so it
// ends.
func fit(p string, limit int, render func(string) string) []string {
	r := render(p)
	if strings.TrimSpace(r) == "" {
		return nil
	}
	size := markdown.UTF16Len(r)
	if size <= limit {
		return []string{r}
	}
	n := markdown.UTF16Len(p)
	budget := min(n*limit/size, n-1)
	if budget < markdown.MinLimit {
		return markdown.Split(r, limit, markdown.UTF16Len)
	}
	var out []string
	for _, q := range markdown.Split(p, budget, markdown.UTF16Len) {
		out = append(out, fit(q, limit, render)...)
	}
	return out
}
