package wire

import (
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The messages of the bridge's own errors, as the specification names them.
const (
	MsgParseError     = "Parse error"
	MsgInvalidRequest = "Invalid Request"
	MsgMethodNotFound = "Method not found"
	MsgInvalidParams  = "Invalid params"
	MsgInternalError  = "Internal error"
)

// ErrorDomain is the ErrorInfo domain of the bridge's own statuses.
const ErrorDomain = "grpc-jsonrpc-bridge"

var (
	// Internal answers a failure of the bridge's own: -32603, without
	// detail (the detail goes to the log).
	Internal = &mapping.Error{Code: mapping.CodeInternalError, Message: MsgInternalError}
	// NotDiscovered answers calls that arrive before discovery succeeded.
	NotDiscovered = &mapping.Error{
		Code:    mapping.Code(codes.Unavailable),
		Message: "the backend's services are not discovered yet; retry later",
		Data:    []byte(`{"status":"UNAVAILABLE","details":[]}`),
	}
)

// ParseError is -32700 for a message that is not JSON; reason is a fixed
// text, safe to show.
func ParseError(reason string) *mapping.Error {
	return &mapping.Error{Code: mapping.CodeParseError, Message: MsgParseError + ": " + reason}
}

// InvalidRequest is -32600 with the reason in its message.
func InvalidRequest(reason string) *mapping.Error {
	return &mapping.Error{Code: mapping.CodeInvalidRequest, Message: MsgInvalidRequest + ": " + reason}
}

// InvalidParams is -32602 with the reason in its message and data: kv are
// key, value pairs of string members its data holds before "reason".
func InvalidParams(reason string, kv ...string) *mapping.Error {
	data := []byte{'{'}
	for i := 0; i+1 < len(kv); i += 2 {
		data = AppendString(data, kv[i])
		data = append(data, ':')
		data = AppendString(data, kv[i+1])
		data = append(data, ',')
	}
	data = append(data, `"reason":`...)
	data = AppendString(data, reason)
	return &mapping.Error{Code: mapping.CodeInvalidParams, Message: MsgInvalidParams + ": " + reason, Data: append(data, '}')}
}

// MethodNotFound is -32601 for method, whose data names it, and the
// reason when there is one.
func MethodNotFound(method []byte, reason string) *mapping.Error {
	data := append([]byte(`{"method":`), Quote(method)...)
	if reason != "" {
		data = append(data, `,"reason":`...)
		data = AppendString(data, reason)
	}
	return &mapping.Error{Code: mapping.CodeMethodNotFound, Message: MsgMethodNotFound, Data: append(data, '}')}
}

// Status is an error of the bridge's own that has a gRPC code: it takes
// the shape of a backend status, with a google.rpc.ErrorInfo detail of
// domain ErrorDomain naming the reason; meta are key, value pairs of its
// metadata.
func Status(code codes.Code, reason, msg string, meta ...string) *mapping.Error {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	if len(meta) > 0 {
		info.Metadata = make(map[string]string, len(meta)/2)
		for i := 0; i+1 < len(meta); i += 2 {
			info.Metadata[meta[i]] = meta[i+1]
		}
	}
	st := status.New(code, msg)
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return mapping.StatusError(st, nil)
}

// Refused is the error of a request refused before it ran, as a gRPC
// status of code would be answered, without details of the bridge's own.
func Refused(code codes.Code, msg string) *mapping.Error {
	return mapping.StatusError(status.New(code, msg), nil)
}

// SlowClient is the error that ends a stream whose client did not read
// its messages within timeout (slow_client_timeout): code 8, reason
// SLOW_CLIENT, naming the limit that was full, "stream_buffer" (value
// messages), "stream_buffer_bytes" (value bytes of one stream's) or
// "ws_buffer_bytes" (value bytes of a connection's streams).
func SlowClient(limit string, value int64, timeout time.Duration) *mapping.Error {
	v := strconv.FormatInt(value, 10)
	what := v + " were"
	switch limit {
	case "stream_buffer_bytes":
		what = v + " bytes of them were"
	case "ws_buffer_bytes":
		what = "the connection's streams had " + v + " bytes"
	}
	return Status(codes.ResourceExhausted, "SLOW_CLIENT",
		"the client did not read the stream's messages in time; "+what+" waiting for longer than slow_client_timeout ("+
			timeout.String()+")",
		"limit", limit, "value", v)
}
