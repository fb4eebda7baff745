package wire

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// NullID is the id of replies to requests whose id could not be read.
var NullID = []byte("null")

// Quote returns s as a JSON string literal, for messages and error data
// that name what the client sent. A long s is cut, with "..." inside the
// literal so that it stays valid JSON.
func Quote(s []byte) string {
	if len(s) > 64 {
		s = s[:64]
		for len(s) > 0 && !utf8.Valid(s) {
			s = s[:len(s)-1]
		}
		return string(AppendString(nil, string(s)+"..."))
	}
	return string(AppendString(nil, string(s)))
}

// AppendString appends s as a JSON string literal.
func AppendString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		return append(dst, `""`...)
	}
	return append(dst, b...)
}

// AppendResultHead appends the start of a success reply, up to the
// result; the caller appends the result and then '}'.
func AppendResultHead(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	return append(dst, `,"result":`...)
}

// AppendResult appends a whole success reply whose result is the JSON
// value result.
func AppendResult(dst, id, result []byte) []byte {
	dst = AppendResultHead(dst, id)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendErrorObject appends e as a JSON-RPC error object.
func AppendErrorObject(dst []byte, e *mapping.Error) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, e.Message)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, '}')
}

// AppendError appends a whole error reply; a nil id is null.
func AppendError(dst, id []byte, e *mapping.Error) []byte {
	if id == nil {
		id = NullID
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":`...)
	dst = AppendErrorObject(dst, e)
	return append(dst, '}')
}

// The bridge's own stream methods and notifications. The JSON-RPC
// specification keeps names beginning with "rpc." for extensions of the
// protocol, which these are; backend methods never take such names (see
// mapping.MethodName).
const (
	StreamPrefix  = "rpc.stream."
	MethodMessage = "rpc.stream.message" // bridge -> client: one response message
	MethodEnd     = "rpc.stream.end"     // bridge -> client: the stream ended
	MethodSend    = "rpc.stream.send"    // client -> bridge: one request message
	MethodClose   = "rpc.stream.close"   // client -> bridge: no more request messages
	MethodCancel  = "rpc.stream.cancel"  // client -> bridge: cancel the stream
)

// AppendStreamMessageHead appends the start of the rpc.stream.message
// notification of stream id, up to its message; the caller appends the
// message and then "}}". Stream ids need no escaping.
func AppendStreamMessageHead(dst []byte, id string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+MethodMessage+`","params":{"stream":"`...)
	dst = append(dst, id...)
	return append(dst, `","message":`...)
}

// AppendStreamEnd appends the rpc.stream.end notification of stream id,
// with the error e when it failed.
func AppendStreamEnd(dst []byte, id string, e *mapping.Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+MethodEnd+`","params":{"stream":"`...)
	dst = append(dst, id...)
	dst = append(dst, '"')
	if e != nil {
		dst = append(dst, `,"error":`...)
		dst = AppendErrorObject(dst, e)
	}
	return append(dst, "}}"...)
}

// AppendLiveMessageHead appends the start of the rpc.stream.message
// notification of a stream answered live over HTTP (POST / with Accept:
// text/event-stream or NDJSON), up to its message; the caller appends the
// message and then "}}". The stream is named by id, the JSON id of the
// request that opened it, as the request sent it.
func AppendLiveMessageHead(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+MethodMessage+`","params":{"stream":`...)
	dst = append(dst, id...)
	return append(dst, `,"message":`...)
}

// AppendLiveResult appends the last message of a stream answered live
// that ended well: the reply to the request id, whose result counts the
// messages sent before it.
func AppendLiveResult(dst, id []byte, messages int) []byte {
	dst = AppendResultHead(dst, id)
	dst = append(dst, `{"messages":`...)
	dst = strconv.AppendInt(dst, int64(messages), 10)
	return append(dst, "}}"...)
}
