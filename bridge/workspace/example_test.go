package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowbridge/flowbridge/bridge/workspace"
	"github.com/flowbridge/flowbridge/testkit/workspacetest"
)

func Example() {
	fake := workspacetest.New(workspacetest.Options{})
	defer fake.Close()
	fake.AddAgent(workspacetest.Agent{UUID: "agent-1"})
	fake.AddFlow(workspacetest.Flow{UUID: "healthcheck", Template: "Checked {host}, service {service}"})

	c, err := workspace.New(workspace.Config{
		BaseURL:       fake.URL,
		WorkspaceUUID: "ws-test",
		Token:         "test-token",
		HTTPClient:    fake.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	session, err := c.CreateSession(ctx, "agent-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range []string{"hello", "how are you"} {
		reply, err := c.Chat(ctx, "agent-1", session, msg)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(reply.Output)
	}

	run, err := c.RunFlowSync(ctx, "healthcheck", map[string]string{"host": "web1", "service": "nginx"}, 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	if text, ok := run.Response(); ok {
		fmt.Println(text)
	}

	fake.ExpireSession(session)
	_, err = c.Chat(ctx, "agent-1", session, "still there?")
	fmt.Println(errors.Is(err, workspace.ErrNotFound))
	// Output:
	// [turn 1] You said: hello
	// [turn 2] You said: how are you
	// Checked web1, service nginx
	// true
}
