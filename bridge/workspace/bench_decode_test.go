package workspace

import "testing"

// BenchmarkDecodeChatReply decodes a chat answer, the per-message API payload.
func BenchmarkDecodeChatReply(b *testing.B) {
	body := []byte(`{"meta":{"agent_uuid":"a1","message":"Message sent","start_at":1716212345123456789,"status":"SUBMITTED"},"result":{"output":"[turn 3] nginx on web1 is up; 3 of 3 probes passed."}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeChatReply(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFlowRun decodes a flow result.
func BenchmarkDecodeFlowRun(b *testing.B) {
	body := []byte(`{"meta":{"status":"SUCCESS"},"result":{"output":{"response":"Health check of web1: nginx is up."}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeFlowRun(body); err != nil {
			b.Fatal(err)
		}
	}
}
