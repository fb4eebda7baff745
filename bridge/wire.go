package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The messages of the bridge's own errors, as the specification names them.
const (
	msgParseError     = "Parse error"
	msgInvalidRequest = "Invalid Request"
	msgMethodNotFound = "Method not found"
	msgInvalidParams  = "Invalid params"
	msgInternalError  = "Internal error"
)

// request is one parsed JSON-RPC request object. Its byte slices alias the
// request body, which outlives the request.
type request struct {
	method []byte // the method name, decoded
	params []byte // raw params, nil when absent
	id     []byte // raw id exactly as sent, nil when absent (a notification)
	// invalid is set when the object is not a valid request; it is then
	// answered with -32600 and "id": null.
	invalid *mapping.Error
}

func (r *request) notification() bool { return r.id == nil && r.invalid == nil }

var nullID = []byte("null")

func invalidRequest(reason string) *mapping.Error {
	return &mapping.Error{Code: mapping.CodeInvalidRequest, Message: msgInvalidRequest + ": " + reason}
}

// parseRequest reads the request object b, which scanValue has accepted.
// Members other than jsonrpc, method, params and id make the request
// invalid, as do duplicate members: the specification defines no others,
// and a duplicated member has no single meaning.
func parseRequest(b []byte) request {
	var r request
	var seenVersion, seenMethod, seenParams bool
	i := skipSpace(b, 1)
	if b[i] == '}' {
		r.invalid = invalidRequest(`missing "jsonrpc" member`)
		return r
	}
	for {
		keyEnd, keyEscaped, _ := scanString(b, i)
		key := b[i+1 : keyEnd-1]
		if keyEscaped {
			key = []byte(unquote(b[i:keyEnd]))
		}
		i = skipSpace(b, keyEnd)
		i = skipSpace(b, i+1) // past ':'
		valStart := i
		i = skipValue(b, i)
		val := b[valStart:i]
		if r.invalid == nil {
			switch string(key) {
			case "jsonrpc":
				if seenVersion {
					r.invalid = invalidRequest(`duplicate "jsonrpc" member`)
				} else if !isVersion(val) {
					r.invalid = invalidRequest(`"jsonrpc" must be exactly "2.0"`)
				}
				seenVersion = true
			case "method":
				if seenMethod {
					r.invalid = invalidRequest(`duplicate "method" member`)
				} else if val[0] != '"' {
					r.invalid = invalidRequest(`"method" must be a string`)
				} else {
					r.method = stringValue(val)
				}
				seenMethod = true
			case "params":
				if seenParams {
					r.invalid = invalidRequest(`duplicate "params" member`)
				} else if val[0] != '{' && val[0] != '[' {
					r.invalid = invalidRequest(`"params" must be an object or an array`)
				}
				r.params = val
				seenParams = true
			case "id":
				if r.id != nil {
					r.invalid = invalidRequest(`duplicate "id" member`)
				} else if c := val[0]; c == '{' || c == '[' || c == 't' || c == 'f' {
					r.invalid = invalidRequest(`"id" must be a string, a number or null`)
				}
				r.id = val
			default:
				r.invalid = invalidRequest("unknown member " + quote(key))
			}
		}
		i = skipSpace(b, i)
		if b[i] == '}' {
			break
		}
		i = skipSpace(b, i+1) // past ','
	}
	switch {
	case r.invalid != nil:
	case !seenVersion:
		r.invalid = invalidRequest(`missing "jsonrpc" member`)
	case !seenMethod:
		r.invalid = invalidRequest(`missing "method" member`)
	}
	return r
}

func isVersion(val []byte) bool {
	if string(val) == `"2.0"` {
		return true
	}
	return val[0] == '"' && unquote(val) == "2.0"
}

// stringValue returns the contents of the JSON string val, decoding escapes
// only when there are any.
func stringValue(val []byte) []byte {
	if bytes.IndexByte(val, '\\') < 0 {
		return val[1 : len(val)-1]
	}
	return []byte(unquote(val))
}

// quote returns s as a JSON string literal, for messages and error data
// that name what the client sent. A long s is cut, with "..." inside the
// literal so that it stays valid JSON.
func quote(s []byte) string {
	if len(s) > 64 {
		s = s[:64]
		for len(s) > 0 && !utf8.Valid(s) {
			s = s[:len(s)-1]
		}
		return string(appendString(nil, string(s)+"..."))
	}
	return string(appendString(nil, string(s)))
}

// appendString appends s as a JSON string literal.
func appendString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		return append(dst, `""`...)
	}
	return append(dst, b...)
}

// appendResultHead appends the start of a success reply, up to the result.
func appendResultHead(dst, id []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	return append(dst, `,"result":`...)
}

// appendErrorObject appends e as a JSON-RPC error object.
func appendErrorObject(dst []byte, e *mapping.Error) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	return append(dst, '}')
}

// appendError appends a whole error reply.
func appendError(dst, id []byte, e *mapping.Error) []byte {
	if id == nil {
		id = nullID
	}
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":`...)
	dst = appendErrorObject(dst, e)
	return append(dst, '}')
}
