package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// ChatReply is the API's answer to a chat message.
type ChatReply struct {
	// AgentUUID, Message and Status are meta.agent_uuid, meta.message
	// (a confirmation, not the reply) and meta.status ("SUBMITTED").
	AgentUUID string
	Message   string
	Status    string
	// StartAt is meta.start_at decoded exactly; its unit is not documented.
	// It is 0 when the API sends no integer.
	StartAt int64
	// Output is result.output, the agent's reply text.
	Output string
}

// Chat sends message to an agent session and returns the agent's reply.
// A session the API no longer knows gives an error matching ErrNotFound.
func (c *Client) Chat(ctx context.Context, agentUUID, sessionUUID, message string) (*ChatReply, error) {
	reply, err := c.chat(ctx, agentUUID, sessionUUID, message)
	if err != nil {
		return nil, fmt.Errorf("chat %s: %w", sessionUUID, err)
	}
	return reply, nil
}

func (c *Client) chat(ctx context.Context, agentUUID, sessionUUID, message string) (*ChatReply, error) {
	body, err := json.Marshal(struct {
		Message string `json:"message"`
	}{message})
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	data, err := c.do(ctx, request{
		op:      OpChat,
		path:    c.workspacePath + "/agents/" + url.PathEscape(agentUUID) + "/sessions/" + url.PathEscape(sessionUUID) + "/chat",
		body:    body,
		timeout: c.chatTimeout,
	})
	if err != nil {
		return nil, err
	}
	return decodeChatReply(data)
}

func decodeChatReply(data []byte) (*ChatReply, error) {
	var resp struct {
		Meta struct {
			AgentUUID string      `json:"agent_uuid"`
			Message   string      `json:"message"`
			StartAt   json.Number `json:"start_at"`
			Status    string      `json:"status"`
		} `json:"meta"`
		Result struct {
			Output *string `json:"output"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, badResponse(err.Error(), data)
	}
	if resp.Result.Output == nil {
		return nil, badResponse("no string result.output", data)
	}
	// start_at is metadata of unknown unit: a float or missing value is
	// no reason to drop the agent's reply.
	startAt, _ := resp.Meta.StartAt.Int64()
	return &ChatReply{
		AgentUUID: resp.Meta.AgentUUID,
		Message:   resp.Meta.Message,
		Status:    resp.Meta.Status,
		StartAt:   startAt,
		Output:    *resp.Result.Output,
	}, nil
}

// CreateSession starts a conversation with an agent and returns its session
// UUID. The API document does not specify this call, so it POSTs {} to
// Config.CreateSessionPath and takes the first non-empty string among
// result.session_uuid, result.uuid, session_uuid and uuid.
func (c *Client) CreateSession(ctx context.Context, agentUUID string) (string, error) {
	id, err := c.createSession(ctx, agentUUID)
	if err != nil {
		return "", fmt.Errorf("create session for agent %s: %w", agentUUID, err)
	}
	return id, nil
}

func (c *Client) createSession(ctx context.Context, agentUUID string) (string, error) {
	path := strings.NewReplacer(
		"{workspace_uuid}", url.PathEscape(c.workspaceUUID),
		"{agent_uuid}", url.PathEscape(agentUUID),
	).Replace(c.createSessionPath)
	data, err := c.do(ctx, request{
		op:      OpCreateSession,
		path:    path,
		body:    []byte("{}"),
		timeout: c.chatTimeout,
	})
	if err != nil {
		return "", err
	}
	return decodeSessionUUID(data)
}

func decodeSessionUUID(data []byte) (string, error) {
	// Loose decoding: fields of other types must not hide a usable UUID.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return "", badResponse(err.Error(), data)
	}
	var result map[string]json.RawMessage
	_ = json.Unmarshal(top["result"], &result)
	for _, raw := range []json.RawMessage{result["session_uuid"], result["uuid"], top["session_uuid"], top["uuid"]} {
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" {
			return s, nil
		}
	}
	return "", badResponse("no session UUID in result.session_uuid, result.uuid, session_uuid or uuid", data)
}
