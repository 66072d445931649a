package slacktest

import (
	"encoding/json"
	"testing"
)

func FuzzValidateBlocks(f *testing.F) {
	for _, seed := range []string{
		`[{"type":"section","text":{"type":"mrkdwn","text":"hi"}}]`,
		`[{"type":"markdown","text":"# h"}]`,
		`[{"type":"actions","elements":[{"type":"button","action_id":"a","value":"v","text":{"type":"plain_text","text":"Go"}}]}]`,
		`[{"type":"header","text":{"type":"mrkdwn","text":"x"}}]`,
		`[{"type":"nope"}]`,
		`{}`,
		`[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		n, code, details := validateBlocks(raw)
		if code == "" {
			var blocks []json.RawMessage
			if err := json.Unmarshal(raw, &blocks); err != nil || n != len(blocks) || n > MaxBlocks {
				t.Errorf("validateBlocks(%q) accepted %d blocks, err %v", raw, n, err)
			}
			return
		}
		if len(details) == 0 {
			t.Errorf("validateBlocks(%q) = %s without details", raw, code)
		}
	})
}
