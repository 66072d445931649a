package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// FlowRun is the result of a synchronous flow run.
type FlowRun struct {
	// Status is meta.status, "SUCCESS" when the flow completed.
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
// default 60 s. The client's own deadline is the timeout plus FlowMargin,
// so a slow flow ends with the API's 408 (ErrTimeout), not a client cut.
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
	}
	if timeout > 0 {
		secs := max(int64((timeout+time.Second-1)/time.Second), 1)
		r.query = "timeout=" + strconv.FormatInt(secs, 10)
		r.timeout = time.Duration(secs)*time.Second + c.flowMargin
	}
	data, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return decodeFlowRun(data)
}

func decodeFlowRun(data []byte) (*FlowRun, error) {
	var resp struct {
		Meta struct {
			Status string `json:"status"`
		} `json:"meta"`
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, badResponse(err.Error(), data)
	}
	out, ok := resp.Result["output"]
	if !ok {
		return nil, badResponse("no result.output", data)
	}
	return &FlowRun{Status: resp.Meta.Status, Output: out}, nil
}
