package main

import (
	"cmp"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// references are the values a config took from ${VAR} references. A value
// from the environment may be a secret written into the wrong key, so no
// error or summary shows it: each is redacted to its reference, in one place,
// whatever the key's own checks quote.
type references struct {
	vars     map[string]string   // variable name -> its value
	keys     map[string][]string // key path -> the variables its value holds
	replacer func() *strings.Replacer
}

// minRedacted is the shortest value that is redacted: a shorter one is no
// secret, and hiding it would garble the text around it ("1 to 10").
const minRedacted = 4

func (r *references) add(key, name, value string) {
	if r.vars == nil {
		r.vars, r.keys = map[string]string{}, map[string][]string{}
		r.replacer = sync.OnceValue(r.newReplacer)
	}
	r.vars[name] = value
	if !slices.Contains(r.keys[key], name) {
		r.keys[key] = append(r.keys[key], name)
	}
}

// redact replaces every form in which a referenced value may be quoted (as
// is, %q-escaped, URL-escaped) by its reference; a quoted value that is the
// whole of one variable reads "the value of ${VAR}".
func (r *references) redact(s string) string {
	if r == nil || len(r.vars) == 0 {
		return s
	}
	return r.replacer().Replace(s)
}

// newReplacer is built once, when a config's references are all known.
func (r *references) newReplacer() *strings.Replacer {
	names := make([]string, 0, len(r.vars))
	for name, v := range r.vars {
		if len(v) >= minRedacted {
			names = append(names, name)
		}
	}
	// Longest first, so that a value inside another is not replaced first.
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(len(r.vars[b]), len(r.vars[a])) })
	var pairs []string
	for _, name := range names {
		pairs = append(pairs, strconv.Quote(r.vars[name]), "the value of ${"+name+"}")
	}
	for _, name := range names {
		v, ref := r.vars[name], "${"+name+"}"
		quoted := strconv.Quote(v)
		pairs = append(pairs, v, ref, quoted[1:len(quoted)-1], ref, url.QueryEscape(v), ref, url.PathEscape(v), ref)
	}
	return strings.NewReplacer(pairs...)
}

// problems redacts each problem and names, in those about a key whose value
// came from references, the variables it came from.
func (r *references) problems(errs []error) []error {
	if r == nil || len(r.vars) == 0 {
		return errs
	}
	out := make([]error, 0, len(errs))
	for _, err := range errs {
		key := problemKey(err)
		msg := r.redact(err.Error())
		if names := r.keys[key]; len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(msg, n) }) {
			msg += " (the value comes from ${" + strings.Join(names, "}, ${") + "})"
		}
		if key != "" {
			msg = strings.TrimPrefix(msg, key+": ")
		}
		out = append(out, &redacted{problem{key: key, msg: msg}, err})
	}
	return out
}

// redacted is a problem shown redacted that still unwraps to the original,
// for errors.Is and errors.As; only its text changes.
type redacted struct {
	problem
	err error
}

func (e *redacted) Unwrap() error { return e.err }

// error redacts an error's text, keeping what it wraps.
func (r *references) error(err error) error {
	if err == nil || r == nil || len(r.vars) == 0 {
		return err
	}
	text := r.redact(err.Error())
	if text == err.Error() {
		return err
	}
	return &redactedError{text, err}
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// writer redacts what is written through it, a write at a time (the
// summaries written through it are written a line at a time).
func (r *references) writer(w io.Writer) io.Writer {
	if r == nil || len(r.vars) == 0 {
		return w
	}
	return redactingWriter{r, w}
}

type redactingWriter struct {
	r *references
	w io.Writer
}

func (rw redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(rw.w, rw.r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
