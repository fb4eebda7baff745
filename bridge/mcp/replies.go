package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
)

// replies is the ResponseWriter the SDK serves /mcp through. It puts the
// bridge's words in place of the SDK's where those are Go's, and answers
// in JSON-RPC where the SDK answers a JSON-RPC message in plain text:
//
//   - a plain-text 400 for a body that is no JSON-RPC message ("malformed
//     payload: " and encoding/json's error with Go type names, or the body
//     quoted back) becomes a JSON-RPC error of fixed text with a null id;
//   - a plain-text 400 for a method the server does not have ("JSON RPC
//     not handled") becomes JSON-RPC's -32601, with the request's id, in
//     a 200 reply, as for any other call; one for a request without an id
//     or a notification with one becomes -32600;
//   - an error reply whose message is the SDK's decoding of the params
//     (params of the wrong shape for initialize, tools/list, tools/call...:
//     "unmarshaling ... into Go struct field mcp.ListToolsParams.cursor of
//     type string"), or whose code is 0, gets a fixed message and a
//     JSON-RPC code, in an event stream or a JSON body alike.
//
// The SDK's text is logged at debug level. Every other reply passes as
// written. The SDK writes each event, and each JSON body, in one Write.
type replies struct {
	http.ResponseWriter
	log *slog.Logger
	// id and method of the request, when the body is one message that
	// peekBytes hold; id is nil otherwise.
	id     json.RawMessage
	method string

	held    bool // a plain-text 400 whose body decides
	decided bool
	dropped bool // the SDK's text, replaced
	kind    int  // of the reply: set at WriteHeader
}

const (
	kindOther = iota
	kindEvents
	kindJSON
)

// peekBytes bounds the part of a POST body read ahead of the SDK for the
// id and method of a refusal.
const peekBytes = 64 << 10

// newReplies returns the replies of the POST r: it reads up to peekBytes
// of its body, then gives the SDK the whole body.
func newReplies(w http.ResponseWriter, r *http.Request, log *slog.Logger) *replies {
	rw := &replies{ResponseWriter: w, log: log}
	if r.Body == nil || r.Body == http.NoBody {
		return rw
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, peekBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err == nil && len(head) <= peekBytes {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(head, &m) == nil && validID(m.ID) {
			rw.id, rw.method = m.ID, m.Method
		}
	}
	return rw
}

// validID tells whether id is a JSON-RPC id a reply may carry: a string or
// a number (null and absent are no id).
func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// The replies a malformed payload gets: bodies the SDK cannot decode as
// messages, and messages that are not valid JSON-RPC 2.0.
var (
	payloadParseError     = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the body is not a JSON-RPC message or batch"}}`)
	payloadInvalidRequest = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the body is not a valid JSON-RPC 2.0 message or batch"}}`)
)

func (w *replies) WriteHeader(code int) {
	if w.decided || w.held {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	ct := w.Header().Get("Content-Type")
	switch {
	case code == http.StatusBadRequest && strings.HasPrefix(ct, "text/plain"):
		w.held = true
		return
	case strings.HasPrefix(ct, "text/event-stream"):
		w.kind = kindEvents
	case strings.HasPrefix(ct, "application/json"):
		w.kind = kindJSON
		w.Header().Del("Content-Length") // a message may change length
	}
	w.decided = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *replies) Write(b []byte) (int, error) {
	if w.held && !w.decided {
		w.decided = true
		if reply, status, ok := w.refusal(string(b)); ok {
			h := w.Header()
			h.Del("X-Content-Type-Options")
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(reply)))
			w.ResponseWriter.WriteHeader(status)
			_, _ = w.ResponseWriter.Write(reply)
			w.dropped = true
			return len(b), nil
		}
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
	}
	if w.dropped {
		return len(b), nil
	}
	if !w.decided {
		w.WriteHeader(http.StatusOK)
	}
	switch w.kind {
	case kindEvents:
		if out, ok := w.event(b); ok {
			if _, err := w.ResponseWriter.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	case kindJSON:
		if out, ok := w.message(b); ok {
			if _, err := w.ResponseWriter.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return w.ResponseWriter.Write(b)
}

// refusal is the JSON-RPC reply, and its HTTP status, in place of the
// SDK's plain-text 400 text, if the bridge has one.
func (w *replies) refusal(text string) ([]byte, int, bool) {
	const malformed, unhandled, invalid = "malformed payload: ", "JSON RPC not handled", "invalid request"
	text = strings.TrimSpace(text)
	switch {
	case strings.HasPrefix(text, malformed):
		w.log.Debug("MCP request refused", "reason", "malformed_payload", "error", strings.TrimPrefix(text, malformed))
		if strings.HasPrefix(text, malformed+"unmarshaling") {
			return payloadParseError, http.StatusBadRequest, true
		}
		return payloadInvalidRequest, http.StatusBadRequest, true
	case strings.HasPrefix(text, unhandled):
		w.log.Debug("MCP request refused", "reason", "method_not_found", "error", text)
		if w.id == nil {
			return errorReply(nil, -32601, "Method not found"), http.StatusBadRequest, true
		}
		return errorReply(w.id, -32601, "Method not found: the bridge's MCP server has no method "+quote(w.method)), http.StatusOK, true
	case strings.HasPrefix(text, invalid):
		w.log.Debug("MCP request refused", "reason", "invalid_request", "error", text)
		return errorReply(w.id, -32600, "Invalid Request: a notification with an id, or a request of a method that takes an id without one"), http.StatusBadRequest, true
	}
	return nil, 0, false
}

// event is the SSE event b with its message made safe, and whether it
// changed.
func (w *replies) event(b []byte) ([]byte, bool) {
	const data = "data: "
	start := len(data)
	if !bytes.HasPrefix(b, []byte(data)) {
		i := bytes.Index(b, []byte("\n"+data))
		if i < 0 {
			return nil, false
		}
		start = i + 1 + len(data)
	}
	end := bytes.Index(b[start:], []byte("\n"))
	if end < 0 {
		return nil, false
	}
	end += start
	msg, ok := w.message(b[start:end])
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, len(b)-(end-start)+len(msg))
	out = append(out, b[:start]...)
	out = append(out, msg...)
	return append(out, b[end:]...), true
}

func (w *replies) message(b []byte) ([]byte, bool) { return safeReply(b, w.log) }

// safeReply is the JSON-RPC reply b with an error in the SDK's own words
// (its decoding of params, in Go's words, or code 0) made safe, and
// whether it changed; log gets the SDK's text.
func safeReply(b []byte, log *slog.Logger) ([]byte, bool) {
	if !bytes.Contains(b, []byte(`"error"`)) {
		return nil, false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &m) != nil || m.Method != nil || m.Error == nil {
		return nil, false
	}
	code, text := m.Error.Code, m.Error.Message
	decoding := strings.Contains(text, "unmarshal") || strings.Contains(text, "Go value") ||
		strings.Contains(text, "Go struct field") || strings.Contains(text, "json: ")
	if !decoding && code != 0 {
		return nil, false
	}
	log.Debug("MCP error reply rewritten", "code", code, "error", text)
	switch {
	case strings.Contains(text, "invalid during session initialization"):
		// A request of a session that is not initialized: one sent without
		// the Mcp-Session-Id initialize gave (the SDK opens a session for
		// it), or before notifications/initialized.
		code, text = -32600, "Invalid Request: the MCP session is not initialized: send initialize, then notifications/initialized, then this request with the Mcp-Session-Id initialize answered"
	case decoding && (code == 0 || code == -32602):
		code, text = -32602, "Invalid params: the params do not match this method's parameters in the MCP schema"
	case code == -32600:
		text = "Invalid Request"
	case code == -32601:
		text = "Method not found"
	default:
		code, text = -32603, "Internal error: the bridge's log has the details"
	}
	id := m.ID
	if !validID(id) {
		id = nil
	}
	return errorReply(id, code, text), true
}

// errorReply is a JSON-RPC error reply; a nil id is null.
func errorReply(id json.RawMessage, code int, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, quote(message)...)
	return append(b, "}}"...)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// end writes a held status that no body followed.
func (w *replies) end() {
	if w.held && !w.decided {
		w.decided = true
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
	}
}

// Flush is http.Flusher's, for the SDK's event streams.
func (w *replies) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap is for http.ResponseController.
func (w *replies) Unwrap() http.ResponseWriter { return w.ResponseWriter }
