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

// Slack's table block limits (docs.slack.dev, "Table block"), enforced by
// the fake: rows and the cells of a row, column settings, the characters
// across a table's cells, and one table per message.
const (
	MaxTableRows           = 100
	MaxTableColumns        = 20
	MaxTableColumnSettings = 20
	MaxTableCellChars      = 10000
)

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
	markdown, tables := 0, 0
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
		case "table":
			if tables++; tables > 1 {
				v.add("only one table block is allowed per message [json-pointer:%s]", ptr)
			}
			v.table(b, ptr)
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

// table checks a table block: 1..MaxTableRows rows of 1..MaxTableColumns
// cells, each cell a raw_text with text, a raw_number with a value, or a
// rich_text with elements; at most MaxTableCellChars characters across
// the cells; column settings with a known alignment.
func (v *blockValidator) table(b map[string]json.RawMessage, ptr string) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(b["rows"], &rows); err != nil || len(rows) == 0 {
		v.add("must provide at least one row [json-pointer:%s/rows]", ptr)
		return
	}
	if len(rows) > MaxTableRows {
		v.add("no more than %d items allowed [json-pointer:%s/rows]", MaxTableRows, ptr)
	}
	chars := 0
	for r, row := range rows {
		rp := fmt.Sprintf("%s/rows/%d", ptr, r)
		if len(row) == 0 {
			v.add("must provide at least one cell [json-pointer:%s]", rp)
		}
		if len(row) > MaxTableColumns {
			v.add("no more than %d items allowed [json-pointer:%s]", MaxTableColumns, rp)
		}
		for c, cell := range row {
			chars += v.tableCell(cell, fmt.Sprintf("%s/%d", rp, c))
		}
	}
	if chars > MaxTableCellChars {
		v.add("table cells must total at most %d characters, got %d [json-pointer:%s/rows]", MaxTableCellChars, chars, ptr)
	}
	if raw, ok := b["column_settings"]; ok {
		var settings []json.RawMessage
		if err := json.Unmarshal(raw, &settings); err != nil {
			v.add("must be an array [json-pointer:%s/column_settings]", ptr)
			return
		}
		if len(settings) > MaxTableColumnSettings {
			v.add("no more than %d items allowed [json-pointer:%s/column_settings]", MaxTableColumnSettings, ptr)
		}
		for i, raw := range settings {
			if string(raw) == "null" {
				continue // a column with the default behaviour
			}
			var s struct {
				Align     *string `json:"align"`
				IsWrapped *bool   `json:"is_wrapped"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				v.add("must be a column setting [json-pointer:%s/column_settings/%d]", ptr, i)
				continue
			}
			if s.Align != nil && *s.Align != "left" && *s.Align != "center" && *s.Align != "right" {
				v.add("must be a valid enum value [json-pointer:%s/column_settings/%d/align]", ptr, i)
			}
		}
	}
}

// tableCell checks one cell and returns its characters.
func (v *blockValidator) tableCell(raw json.RawMessage, ptr string) int {
	var c struct {
		Type     string            `json:"type"`
		Text     *string           `json:"text"`
		Value    *float64          `json:"value"`
		Elements []json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || string(raw) == "null" {
		v.add("must be a table cell [json-pointer:%s]", ptr)
		return 0
	}
	switch c.Type {
	case "raw_text":
		if c.Text == nil || *c.Text == "" {
			v.add("must be more than 0 characters [json-pointer:%s/text]", ptr)
			return 0
		}
		return utf8.RuneCountInString(*c.Text)
	case "raw_number":
		if c.Value == nil {
			v.add("missing required field: value [json-pointer:%s]", ptr)
		}
		if c.Text != nil {
			return utf8.RuneCountInString(*c.Text)
		}
		return 0
	case "rich_text":
		if len(c.Elements) == 0 {
			v.add("missing required field: elements [json-pointer:%s]", ptr)
		}
		return richTextChars(raw)
	}
	v.add("failed to match any allowed schemas: type %q [json-pointer:%s/type]", c.Type, ptr)
	return 0
}

// richTextChars counts the characters of every "text" string in a rich
// text object, however deep.
func richTextChars(raw json.RawMessage) int {
	var node any
	if json.Unmarshal(raw, &node) != nil {
		return 0
	}
	var count func(any) int
	count = func(n any) int {
		total := 0
		switch n := n.(type) {
		case map[string]any:
			for k, x := range n {
				if s, ok := x.(string); ok && k == "text" {
					total += utf8.RuneCountInString(s)
				} else {
					total += count(x)
				}
			}
		case []any:
			for _, x := range n {
				total += count(x)
			}
		}
		return total
	}
	return count(node)
}
