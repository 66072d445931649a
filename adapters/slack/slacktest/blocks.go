package slacktest

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// blockTypes are the layout blocks Slack accepts in messages.
var blockTypes = map[string]bool{
	"actions": true, "context": true, "divider": true, "file": true, "header": true,
	"image": true, "input": true, "markdown": true, "rich_text": true, "section": true,
	"video": true, "table": true, "context_actions": true, "call": true,
}

// validateBlocks checks a message's blocks JSON against Slack's limits and
// returns the number of blocks, or Slack's error code and the detail lines
// Slack sends (with their json-pointer).
func validateBlocks(raw []byte) (int, string, []string) {
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return 0, "invalid_blocks_format", []string{err.Error()}
	}
	if len(blocks) > MaxBlocks {
		return 0, "invalid_blocks", []string{fmt.Sprintf("no more than %d items allowed [json-pointer:/blocks]", MaxBlocks)}
	}
	var v blockValidator
	markdown := 0
	for i, b := range blocks {
		ptr := fmt.Sprintf("/blocks/%d", i)
		typ := str(b["type"])
		if !blockTypes[typ] {
			v.add("unsupported type: %q [json-pointer:%s/type]", typ, ptr)
			continue
		}
		if id := str(b["block_id"]); utf8.RuneCountInString(id) > MaxBlockID {
			v.add("must be less than %d characters [json-pointer:%s/block_id]", MaxBlockID+1, ptr)
		}
		switch typ {
		case "section":
			v.section(b, ptr)
		case "header":
			v.textObject(b["text"], ptr+"/text", MaxHeaderText, true, true)
		case "markdown":
			t := str(b["text"])
			if t == "" {
				v.add("must be more than 0 characters [json-pointer:%s/text]", ptr)
			}
			markdown += utf8.RuneCountInString(t)
		case "context":
			v.elements(b["elements"], ptr, MaxContextElements)
		case "actions":
			v.elements(b["elements"], ptr, MaxActionsElements)
		}
	}
	if markdown > MaxMarkdownText {
		v.add("markdown blocks must total at most %d characters, got %d [json-pointer:/blocks]", MaxMarkdownText, markdown)
	}
	if len(v.errs) > 0 {
		return 0, "invalid_blocks", v.errs
	}
	return len(blocks), "", nil
}

type blockValidator struct{ errs []string }

func (v *blockValidator) add(format string, args ...any) {
	v.errs = append(v.errs, fmt.Sprintf(format, args...))
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (v *blockValidator) section(b map[string]json.RawMessage, ptr string) {
	var fields []json.RawMessage
	_ = json.Unmarshal(b["fields"], &fields)
	if len(b["text"]) == 0 && len(fields) == 0 {
		v.add("must provide either text or fields [json-pointer:%s]", ptr)
	}
	if len(b["text"]) > 0 {
		v.textObject(b["text"], ptr+"/text", MaxSectionText, false, true)
	}
	if len(fields) > MaxSectionFields {
		v.add("no more than %d items allowed [json-pointer:%s/fields]", MaxSectionFields, ptr)
	}
	for i, f := range fields {
		v.textObject(f, fmt.Sprintf("%s/fields/%d", ptr, i), MaxFieldText, false, true)
	}
	if len(b["accessory"]) > 0 {
		v.element(b["accessory"], ptr+"/accessory")
	}
}

// textObject checks a composition text object: a type of plain_text or
// mrkdwn (plain_text only when plainOnly), and a text of 1..limit characters.
func (v *blockValidator) textObject(raw json.RawMessage, ptr string, limit int, plainOnly, required bool) {
	var t struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || len(raw) == 0 {
		if required {
			v.add("must be a text object [json-pointer:%s]", ptr)
		}
		return
	}
	switch {
	case t.Type != "plain_text" && (plainOnly || t.Type != "mrkdwn"):
		v.add("must be a valid enum value [json-pointer:%s/type]", ptr)
	case t.Text == "":
		v.add("must be more than 0 characters [json-pointer:%s/text]", ptr)
	case utf8.RuneCountInString(t.Text) > limit:
		v.add("must be less than %d characters [json-pointer:%s/text]", limit+1, ptr)
	}
}

func (v *blockValidator) elements(raw json.RawMessage, ptr string, max int) {
	var els []json.RawMessage
	if err := json.Unmarshal(raw, &els); err != nil || len(els) == 0 {
		v.add("must provide at least one element [json-pointer:%s/elements]", ptr)
		return
	}
	if len(els) > max {
		v.add("no more than %d items allowed [json-pointer:%s/elements]", max, ptr)
	}
	for i, e := range els {
		v.element(e, fmt.Sprintf("%s/elements/%d", ptr, i))
	}
}

func (v *blockValidator) element(raw json.RawMessage, ptr string) {
	var e map[string]json.RawMessage
	if err := json.Unmarshal(raw, &e); err != nil {
		v.add("must be an object [json-pointer:%s]", ptr)
		return
	}
	switch str(e["type"]) {
	case "plain_text", "mrkdwn":
		v.textObject(raw, ptr, MaxSectionText, false, true)
	case "button":
		v.textObject(e["text"], ptr+"/text", MaxButtonText, true, true)
		if utf8.RuneCountInString(str(e["action_id"])) > MaxBlockID {
			v.add("must be less than %d characters [json-pointer:%s/action_id]", MaxBlockID+1, ptr)
		}
		if utf8.RuneCountInString(str(e["value"])) > MaxButtonValue {
			v.add("must be less than %d characters [json-pointer:%s/value]", MaxButtonValue+1, ptr)
		}
	case "":
		v.add("missing type [json-pointer:%s/type]", ptr)
	}
}
