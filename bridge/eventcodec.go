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
	var err error
	dst = append(dst, `{"kind":`...)
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, `,"platform":`...)
	if dst, err = appendJSONString(dst, ev.Platform); err != nil {
		return nil, err
	}
	dst = append(dst, `,"conversation":`...)
	if dst, err = appendJSONString(dst, ev.Conversation); err != nil {
		return nil, err
	}
	for _, f := range [...]struct{ name, v string }{{`,"parent":`, ev.Parent}, {`,"team":`, ev.Team}, {`,"channel":`, ev.Channel}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			if dst, err = appendJSONString(dst, f.v); err != nil {
				return nil, err
			}
		}
	}
	dst = append(dst, `,"user":{"ID":`...)
	if dst, err = appendJSONString(dst, ev.User.ID); err != nil {
		return nil, err
	}
	dst = append(dst, `,"Name":`...)
	if dst, err = appendJSONString(dst, ev.User.Name); err != nil {
		return nil, err
	}
	dst = append(dst, `,"Groups":`...)
	if dst, err = appendMarshal(dst, ev.User.Groups); err != nil {
		return nil, err
	}
	dst = append(dst, '}')
	for _, f := range [...]struct{ name, v string }{{`,"text":`, ev.Text}, {`,"command":`, ev.Command}} {
		if f.v != "" {
			dst = append(dst, f.name...)
			if dst, err = appendJSONString(dst, f.v); err != nil {
				return nil, err
			}
		}
	}
	if ev.Action != (Action{}) {
		dst = append(dst, `,"action":{"ID":`...)
		if dst, err = appendJSONString(dst, ev.Action.ID); err != nil {
			return nil, err
		}
		dst = append(dst, `,"Value":`...)
		if dst, err = appendJSONString(dst, ev.Action.Value); err != nil {
			return nil, err
		}
		dst = append(dst, '}')
	}
	if ev.Flow != "" {
		dst = append(dst, `,"flow":`...)
		if dst, err = appendJSONString(dst, ev.Flow); err != nil {
			return nil, err
		}
	}
	if len(ev.Params) > 0 {
		dst = append(dst, `,"params":`...)
		if dst, err = appendMarshal(dst, ev.Params); err != nil {
			return nil, err
		}
	}
	if ev.MaxFlowTimeout != 0 {
		dst = append(dst, `,"max_flow_timeout":`...)
		dst = strconv.AppendInt(dst, int64(ev.MaxFlowTimeout), 10)
	}
	if len(ev.Route) > 0 {
		dst = append(dst, `,"route":`...)
		if dst, err = appendMarshal(dst, ev.Route); err != nil {
			return nil, err
		}
	}
	if len(ev.Files) > 0 {
		dst = append(dst, `,"files":`...)
		if dst, err = appendMarshal(dst, ev.Files); err != nil {
			return nil, err
		}
	}
	if ev.alone {
		dst = append(dst, `,"alone":true`...)
	}
	return append(dst, '}'), nil
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
