package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FlowRun is the result of a synchronous flow run that succeeded.
type FlowRun struct {
	// Status is meta.status: "SUCCESS" in any case, or "" when the API
	// sent none.
	Status string
	// Output is result.output exactly as received; its shape depends on the flow.
	Output json.RawMessage
}

// Response returns result.output.response when the output is an object
// whose "response" is a string, the shape the API document shows.
func (r *FlowRun) Response() (string, bool) {
	var out struct {
		Response *string `json:"response"`
	}
	if err := json.Unmarshal(r.Output, &out); err != nil || out.Response == nil {
		return "", false
	}
	return *out.Response, true
}

// RunFlowSync runs a flow and waits for its result. params fill the flow's
// placeholders. timeout is sent as the timeout query parameter in whole
// seconds, rounded up; zero or negative sends none, so the API waits its
// default 60 s. The whole call, reading the response included, ends by that
// timeout (or 60 s) plus FlowMargin (at most a second), so a slow flow ends
// with the API's 408 (ErrTimeout), and a response that hangs or drips past
// it with ErrTimeout too, as well as ErrUnreachable and
// context.DeadlineExceeded: the flow did not finish in its time, whichever
// side noticed.
//
// The run is sent once: only a dial that failed is tried again. A 429 or
// 503 comes back at once as an *APIError (ErrRateLimited, ErrUnavailable)
// carrying RetryAfter, for the caller to decide. An answer whose
// meta.status is present and not SUCCESS is a *FlowFailedError
// (ErrFlowFailed); an absent meta.status counts as success.
func (c *Client) RunFlowSync(ctx context.Context, flowUUID string, params map[string]string, timeout time.Duration) (*FlowRun, error) {
	run, err := c.runFlowSync(ctx, flowUUID, params, timeout)
	if err != nil {
		return nil, fmt.Errorf("run flow %s: %w", flowUUID, err)
	}
	return run, nil
}

func (c *Client) runFlowSync(ctx context.Context, flowUUID string, params map[string]string, timeout time.Duration) (*FlowRun, error) {
	if params == nil {
		params = map[string]string{}
	}
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode parameters: %w", err)
	}
	r := request{
		op:      OpRunFlow,
		path:    c.workspacePath + "/prompts/" + url.PathEscape(flowUUID) + "/run/sync",
		body:    body,
		timeout: DefaultFlowTimeout + c.flowMargin,
		// resendOn429 stays false: a flow run is never sent twice.
	}
	if timeout > 0 {
		secs := max(int64((timeout+time.Second-1)/time.Second), 1)
		r.query = "timeout=" + strconv.FormatInt(secs, 10)
		r.timeout = timeout + c.flowMargin
	}
	data, err := c.do(ctx, r)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, ErrUnreachable) && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return nil, err
	}
	return decodeFlowRun(data)
}

// flowSucceeded is meta.status of a flow that completed.
const flowSucceeded = "SUCCESS"

func decodeFlowRun(data []byte) (*FlowRun, error) {
	var resp struct {
		Meta struct {
			Status string `json:"status"`
		} `json:"meta"`
		// Decoded after the status, so that a failed run whose result has
		// another shape still reads as a failure.
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, badResponse(err.Error(), data)
	}
	if status := resp.Meta.Status; failed(status, flowSucceeded) {
		return nil, &FlowFailedError{Status: errorText([]byte(status), maxStatus), Message: failureMessage(data)}
	}
	var result map[string]json.RawMessage
	if len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, &result); err != nil {
			return nil, badResponse("result: "+err.Error(), data)
		}
	}
	out, ok := result["output"]
	if !ok {
		return nil, badResponse("no result.output", data)
	}
	return &FlowRun{Status: resp.Meta.Status, Output: out}, nil
}

// maxStatus bounds the meta.status kept in an error.
const maxStatus = 100

// failed reports whether a meta.status says the call did not do what was
// asked: present, and not want (in any case, around spaces). An absent or
// blank status is not a failure: the API document shows only the success
// values, so absence proves nothing, while another value is a claim.
func failed(status, want string) bool {
	status = strings.TrimSpace(status)
	return status != "" && !strings.EqualFold(status, want)
}

// failureMessage returns the first human text in a response reporting a
// failure, among meta.message, result.error, error and message; a value
// that is not a string is given as its JSON. It is cut to maxFailureMessage.
func failureMessage(data []byte) string {
	// Loose decoding: a field of an unexpected type must not hide the others.
	var top, meta, result map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	_ = json.Unmarshal(top["meta"], &meta)
	_ = json.Unmarshal(top["result"], &result)
	for _, raw := range []json.RawMessage{meta["message"], result["error"], top["error"], top["message"]} {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			var compact bytes.Buffer
			if json.Compact(&compact, raw) != nil || compact.String() == "null" {
				continue
			}
			text = compact.String()
		}
		if text = errorText([]byte(text), maxFailureMessage); text != "" {
			return text
		}
	}
	return ""
}
