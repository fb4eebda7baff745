package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// maxProgressMessage bounds the JSON of a stream message quoted in its
// progress notification; a longer one is reported by its size.
const maxProgressMessage = 4 << 10

// handler runs a call of t through the engine and turns its reply into
// the tool's result.
func (s *Server) handler(t *tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		// The SDK does not recover a handler's panic: it would end the
		// process. It becomes an INTERNAL result and a log line.
		defer func() {
			if p := recover(); p != nil {
				s.opts.Logger.Error("mcp: panic in a tool call", "tool", req.Params.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = errorResult("INTERNAL (gRPC code 13): internal error"), nil
			}
		}()
		args := bytes.TrimSpace(req.Params.Arguments)
		switch {
		case len(args) == 0 || string(args) == "null":
			args = []byte("{}")
		case args[0] != '{':
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "invalid params: the arguments of tool " + req.Params.Name + " must be a JSON object (the request message of " + t.method + ")"}
		}
		body := make([]byte, 0, len(args)+len(t.method)+48)
		body = append(body, `{"jsonrpc":"2.0","id":1,"method":`...)
		body = strconv.AppendQuote(body, t.method)
		body = append(body, `,"params":`...)
		body = append(body, args...)
		body = append(body, '}')
		h := header(req.Extra)
		var reply []byte
		if t.stream {
			reply = s.engine.Stream(ctx, h, body, s.progress(ctx, req))
		} else {
			reply = s.engine.Call(ctx, h, body)
		}
		return result(t, reply)
	}
}

// progress returns what reports each message of a server stream as a
// progress notification, when the call asked for them with a progress
// token; nil otherwise.
func (s *Server) progress(ctx context.Context, req *sdk.CallToolRequest) func(json.RawMessage) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	var n atomic.Int64
	return func(msg json.RawMessage) {
		i := n.Add(1)
		text := "message " + strconv.FormatInt(i, 10)
		if len(msg) <= maxProgressMessage {
			text += ": " + string(msg)
		} else {
			text += " (" + strconv.Itoa(len(msg)) + " bytes)"
		}
		err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Message: text})
		if err != nil {
			s.opts.Logger.Debug("mcp: cannot send a progress notification", "error", err)
		}
	}
}

// reply is a JSON-RPC reply of the engine.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// result turns the engine's JSON-RPC reply to a call of t into the tool's
// result: the result object as structuredContent (wrapped in t.wrap when
// it is not an object) and as text; a gRPC status as an error result
// naming it; invalid params as the protocol's invalid params error.
func result(t *tool, raw []byte) (*sdk.CallToolResult, error) {
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil || r.Error == nil && r.Result == nil {
		return errorResult("INTERNAL: the bridge gave no reply to the call of " + t.method), nil
	}
	if e := r.Error; e != nil {
		switch {
		case e.Code == int(mapping.CodeInvalidParams):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: e.Data}
		case e.Code >= 1 && e.Code <= 16:
			return errorResult(statusText(e.Code, e.Message, e.Data)), nil
		}
		text := e.Message + " (JSON-RPC error " + strconv.Itoa(e.Code) + ")"
		if len(e.Data) > 0 && string(e.Data) != "null" {
			text += "\ndata: " + string(e.Data)
		}
		return errorResult(text), nil
	}
	content := []byte(r.Result)
	if t.wrap != "" {
		content = make([]byte, 0, len(r.Result)+len(t.wrap)+4)
		content = append(content, '{')
		content = strconv.AppendQuote(content, t.wrap)
		content = append(content, ':')
		content = append(content, r.Result...)
		content = append(content, '}')
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(content)}},
		StructuredContent: json.RawMessage(content),
	}, nil
}

// statusText says what a gRPC status is: "NOT_FOUND (gRPC code 5): the
// message", then its details as JSON when it has some.
func statusText(code int, message string, data json.RawMessage) string {
	var d struct {
		Status  string          `json:"status"`
		Details json.RawMessage `json:"details"`
	}
	_ = json.Unmarshal(data, &d)
	name := d.Status
	if name == "" {
		name = mapping.CodeName(codes.Code(code))
	}
	text := name + " (gRPC code " + strconv.Itoa(code) + "): " + message
	if det := bytes.TrimSpace(d.Details); len(det) > 0 && string(det) != "[]" && string(det) != "null" {
		var compact bytes.Buffer
		if json.Compact(&compact, det) == nil {
			det = compact.Bytes()
		}
		text += "\ndetails: " + string(det)
	}
	return text
}

func errorResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}
