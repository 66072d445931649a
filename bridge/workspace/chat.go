package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
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
// The message is sent again only where the API said it did not take it: a
// 429 with a Retry-After of at most 30 s that ends within ChatTimeout, or
// a dial that failed; never after a 503, a timeout or a broken connection.
// An answer whose meta.status is present and not SUBMITTED is a
// *ChatFailedError (ErrChatFailed).
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
		op:          OpChat,
		path:        c.workspacePath + "/agents/" + url.PathEscape(agentUUID) + "/sessions/" + url.PathEscape(sessionUUID) + "/chat",
		body:        body,
		timeout:     c.chatTimeout,
		resendOn429: true,
	})
	if err != nil {
		return nil, err
	}
	return decodeChatReply(data)
}

// chatSubmitted is meta.status of a chat message the API took.
const chatSubmitted = "SUBMITTED"

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
	if status := resp.Meta.Status; failed(status, chatSubmitted) {
		return nil, &ChatFailedError{Status: errorText([]byte(status), maxStatus), Message: failureMessage(data)}
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
// result.session_uuid, result.uuid, session_uuid and uuid. That string must
// be a UUID in canonical form (see ValidSessionID), and is returned in lower
// case; anything else is an error matching ErrBadResponse. The request is
// sent again on the same terms as a chat message.
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
		op:          OpCreateSession,
		path:        path,
		body:        []byte("{}"),
		timeout:     c.chatTimeout,
		resendOn429: true,
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
		if json.Unmarshal(raw, &s) != nil || s == "" {
			continue
		}
		id, ok := ValidSessionID(s)
		if !ok {
			// Quote only the start: the value may be huge.
			return "", fmt.Errorf("%w: session ID is not a UUID: %s (%d bytes)", ErrBadResponse, strconv.Quote(errorText([]byte(s), 40)), len(s))
		}
		return id, nil
	}
	return "", badResponse("no session UUID in result.session_uuid, result.uuid, session_uuid or uuid", data)
}

// ValidSessionID reports whether s is a session ID the client accepts: a
// UUID in the canonical 8-4-4-4-12 hexadecimal form, in any case. canonical
// is s in lower case.
func ValidSessionID(s string) (canonical string, ok bool) {
	// uuid.Parse also takes braces, a urn:uuid: prefix and no hyphens.
	if len(s) != 36 {
		return "", false
	}
	id, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return id.String(), true
}
