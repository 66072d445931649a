package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// appendStoredEvent appends ev as the JSON json.Marshal gives for its
// storedEvent, byte for byte, without reflection: every chat message is
// encoded once on its way into the inbox, and reflection made that a
// measurable share of a message's CPU. Values the fast path does not
// handle (rare ones: parameters, files, groups, strings needing escapes)
// go through json.Marshal, so the output stays exact.
func appendStoredEvent(dst []byte, ev Event) ([]byte, error) {
	e := eventWriter{dst: append(dst, `{"kind":`...)}
	e.dst = strconv.AppendInt(e.dst, int64(ev.Kind), 10)
	e.str(`,"platform":`, ev.Platform, false)
	e.str(`,"conversation":`, ev.Conversation, false)
	e.str(`,"parent":`, ev.Parent, true)
	e.str(`,"team":`, ev.Team, true)
	e.str(`,"channel":`, ev.Channel, true)
	e.str(`,"user":{"ID":`, ev.User.ID, false)
	e.str(`,"Name":`, ev.User.Name, false)
	e.value(`,"Groups":`, ev.User.Groups)
	e.dst = append(e.dst, '}')
	e.str(`,"text":`, ev.Text, true)
	e.str(`,"command":`, ev.Command, true)
	if ev.Action != (Action{}) {
		e.str(`,"action":{"ID":`, ev.Action.ID, false)
		e.str(`,"Value":`, ev.Action.Value, false)
		e.str(`,"Message":`, ev.Action.Message, true)
		e.str(`,"Link":`, ev.Action.Link, true)
		e.dst = append(e.dst, '}')
	}
	e.str(`,"flow":`, ev.Flow, true)
	if len(ev.Params) > 0 {
		e.value(`,"params":`, ev.Params)
	}
	if ev.MaxFlowTimeout != 0 {
		e.dst = append(e.dst, `,"max_flow_timeout":`...)
		e.dst = strconv.AppendInt(e.dst, int64(ev.MaxFlowTimeout), 10)
	}
	if len(ev.Route) > 0 {
		e.value(`,"route":`, ev.Route)
	}
	if len(ev.Files) > 0 {
		e.value(`,"files":`, ev.Files)
	}
	if ev.alone {
		e.dst = append(e.dst, `,"alone":true`...)
	}
	e.str(`,"schedule":`, ev.schedule, true)
	if ev.giveUp != 0 {
		e.dst = append(e.dst, `,"give_up":`...)
		e.dst = strconv.AppendInt(e.dst, ev.giveUp, 10)
	}
	if ev.missed {
		e.dst = append(e.dst, `,"missed":true`...)
	}
	if e.err != nil {
		return nil, e.err
	}
	return append(e.dst, '}'), nil
}

// eventWriter appends an object's fields, keeping the first error.
type eventWriter struct {
	dst []byte
	err error
}

// str appends name (its comma and key) and v quoted, or nothing when v is
// empty and omitempty holds.
func (e *eventWriter) str(name, v string, omitempty bool) {
	if e.err != nil || (omitempty && v == "") {
		return
	}
	e.dst = append(e.dst, name...)
	e.dst, e.err = appendJSONString(e.dst, v)
}

// value appends name and json.Marshal's encoding of v.
func (e *eventWriter) value(name string, v any) {
	if e.err != nil {
		return
	}
	e.dst = append(e.dst, name...)
	e.dst, e.err = appendMarshal(e.dst, v)
}

// appendJSONString appends s quoted as encoding/json quotes it. Printable
// ASCII that needs no escape (json.Marshal escapes <, > and & for HTML) is
// copied; anything else is left to json.Marshal.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendMarshal(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

// appendMarshal appends json.Marshal's encoding of v. A json.RawMessage
// (the adapters' route) is compacted by json.Marshal, and so is it here.
func appendMarshal(dst []byte, v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok && json.Valid(raw) && isCompactPlain(raw) {
		return append(dst, raw...), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// isCompactPlain reports whether raw JSON is already what json.Marshal
// would make of it: no white space outside strings and nothing it escapes
// for HTML.
func isCompactPlain(raw []byte) bool {
	if bytes.ContainsAny(raw, "<>&") || bytes.Contains(raw, []byte("\u2028")) || bytes.Contains(raw, []byte("\u2029")) {
		return false
	}
	in := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}
