package bridge

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrQuote reports an opening quote with no closing one.
var ErrQuote = errors.New("unterminated quote")

// ArgError is a problem with a command's arguments that the user can fix.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return e.Msg }

// SplitArgs splits a command line into words the way a POSIX shell would for
// quoting: whitespace separates words, '…' is literal, "…" allows \" and \\
// escapes, and a backslash outside quotes escapes the next character. Chat
// clients turn straight quotes into curly ones as people type (Slack, macOS), so
// “…” and ‘…’ count as quotes too.
func SplitArgs(s string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   rune // the closing quote we wait for, 0 outside quotes
		escaped bool
	)
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '"' || quote == '”':
			switch {
			case r == '\\':
				escaped = true
			case r == '"' && quote == '"', r == '”' && quote == '”':
				quote = 0
			default:
				cur.WriteRune(r)
			}
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case r == '"':
			quote, inWord = '"', true
		case r == '“':
			quote, inWord = '”', true
		case r == '\'':
			quote, inWord = '\'', true
		case r == '‘':
			quote, inWord = '’', true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%w (%c): close it or escape it with a backslash", ErrQuote, openingQuote(quote))
	}
	if escaped {
		cur.WriteRune('\\')
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func openingQuote(closing rune) rune {
	switch closing {
	case '”':
		return '“'
	case '’':
		return '‘'
	}
	return closing
}

// QuoteArg returns s quoted so that SplitArgs gives it back as one word.
// Adapters that receive typed options (Discord) use it to rebuild a command line.
func QuoteArg(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("\"'\\“”‘’", r)
	}) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// ParseFlowArgs reads "NAME key=value …": the flow name and its parameters.
// It checks the grammar only; which keys a flow accepts is checked against the
// catalog. An empty line gives an empty name.
func ParseFlowArgs(line string) (name string, params map[string]string, err error) {
	words, err := SplitArgs(line)
	if err != nil {
		return "", nil, &ArgError{Msg: "Could not read the parameters: " + err.Error() + "."}
	}
	if len(words) == 0 {
		return "", nil, nil
	}
	name = strings.ToLower(words[0])
	params = make(map[string]string, len(words)-1)
	for _, w := range words[1:] {
		key, value, ok := strings.Cut(w, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return name, nil, &ArgError{Msg: fmt.Sprintf("Parameters are written key=value; %q is not. Quote values with spaces: key=\"two words\".", w)}
		}
		if _, dup := params[key]; dup {
			return name, nil, &ArgError{Msg: fmt.Sprintf("Parameter %q is given twice.", key)}
		}
		params[key] = value
	}
	return name, params, nil
}
