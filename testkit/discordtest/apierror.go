package discordtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Discord JSON error codes the fake answers with.
const (
	CodeGeneral                = 0
	CodeUnknownChannel         = 10003
	CodeUnknownMessage         = 10008
	CodeUnknownWebhook         = 10015
	CodeUnknownInteraction     = 10062
	CodeCannotEditOthers       = 50005
	CodeEmptyMessage           = 50006
	CodeWrongChannelType       = 50024
	CodeInvalidWebhookToken    = 50027
	CodeInvalidFormBody        = 50035
	CodeAlreadyAcknowledged    = 40060
	CodeThreadAlreadyCreated   = 160004
	CodeUnauthorizedPermission = 50013
)

// apiError is a refusal as Discord words it; reason is the fake's explanation, kept out of
// Discord's own message field (tests see it in Request.Error and in the body).
type apiError struct {
	status  int
	code    int
	message string
	fields  []fieldError
}

type fieldError struct {
	path    string // dotted: "embeds.0.description"
	code    string // "BASE_TYPE_MAX_LENGTH"
	message string
}

func (e *apiError) Error() string {
	if len(e.fields) == 0 {
		return fmt.Sprintf("%d %s (code %d)", e.status, e.message, e.code)
	}
	parts := make([]string, len(e.fields))
	for i, f := range e.fields {
		parts[i] = f.path + ": " + f.message
	}
	return fmt.Sprintf("%d %s (code %d): %s", e.status, e.message, e.code, strings.Join(parts, "; "))
}

func newAPIError(status, code int, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// formErrors collects 50035 field errors.
type formErrors []fieldError

func (f *formErrors) add(path, code, format string, args ...any) {
	*f = append(*f, fieldError{path: path, code: code, message: fmt.Sprintf(format, args...)})
}

func (f formErrors) err() *apiError {
	if len(f) == 0 {
		return nil
	}
	return &apiError{status: http.StatusBadRequest, code: CodeInvalidFormBody, message: "Invalid Form Body", fields: f}
}

// body renders the error as Discord does: {"message","code","errors":{path…:{"_errors":[…]}}}.
func (e *apiError) body() []byte {
	out := map[string]any{"message": e.message, "code": e.code}
	if len(e.fields) > 0 {
		tree := map[string]any{}
		for _, f := range e.fields {
			node := tree
			for _, p := range strings.Split(f.path, ".") {
				next, ok := node[p].(map[string]any)
				if !ok {
					next = map[string]any{}
					node[p] = next
				}
				node = next
			}
			list, _ := node["_errors"].([]any)
			node["_errors"] = append(list, map[string]any{"code": f.code, "message": f.message})
		}
		out["errors"] = tree
	}
	b, err := json.Marshal(out)
	if err != nil {
		return []byte(`{"message":"discordtest: encode error","code":0}`)
	}
	return b
}
