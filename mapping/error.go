package mapping

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Code is a JSON-RPC 2.0 error code.
type Code int

// The codes the JSON-RPC 2.0 specification reserves for itself. The bridge
// uses them only for its own errors, never for a backend's status.
const (
	CodeParseError     Code = -32700
	CodeInvalidRequest Code = -32600
	CodeMethodNotFound Code = -32601
	CodeInvalidParams  Code = -32602
	CodeInternalError  Code = -32603
)

// Error is a JSON-RPC 2.0 error object. Its Message is always text the
// bridge chose or the backend's status message; Data, when set, is valid
// JSON.
type Error struct {
	Code    Code            `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return "jsonrpc error " + strconv.Itoa(int(e.Code)) + ": " + e.Message
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}
