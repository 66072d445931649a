package workspace_test

import (
	"testing"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

func BenchmarkChat(b *testing.B) {
	for _, mode := range []string{"memory", "loopback"} {
		b.Run(mode, func(b *testing.B) {
			fake := workspacetest.New(workspacetest.Options{NoRecord: true})
			if mode == "loopback" {
				fake.Start()
			}
			b.Cleanup(fake.Close)
			fake.AddAgent(workspacetest.Agent{UUID: agentUUID})
			c, err := workspace.New(workspace.Config{
				BaseURL:       fake.URL,
				WorkspaceUUID: "ws-test",
				Token:         "test-token",
				HTTPClient:    fake.Client(),
			})
			if err != nil {
				b.Fatalf("New: %v", err)
			}
			session, err := c.CreateSession(b.Context(), agentUUID)
			if err != nil {
				b.Fatalf("CreateSession: %v", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Chat(b.Context(), agentUUID, session, "hello"); err != nil {
					b.Fatalf("Chat: %v", err)
				}
			}
		})
	}
}
