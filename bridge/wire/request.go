package wire

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// A Request is one parsed JSON-RPC request object. Its byte slices alias
// the message it was parsed from, which must outlive it.
type Request struct {
	Method []byte // the method name, decoded
	Params []byte // raw params, nil when absent
	ID     []byte // raw id exactly as sent, nil when absent (a notification)
	// Invalid is set when the object is not a valid request; it is then
	// answered with -32600 and "id": null.
	Invalid *mapping.Error
}

// Notification reports whether r is a valid request without an id, which
// gets no reply.
func (r *Request) Notification() bool { return r.ID == nil && r.Invalid == nil }

// A Message is one JSON-RPC message as Parse read it: a single request, or
// a batch of them.
type Message struct {
	// Batch tells a batch (even of one member) from a single request.
	Batch bool
	// Single is the request of a message that is not a batch.
	Single Request
	// Members are the members of a batch, in order; a member that is not
	// an object is Invalid.
	Members []Request
}

// Len is the number of requests in m.
func (m *Message) Len() int {
	if m.Batch {
		return len(m.Members)
	}
	return 1
}

// At returns the i-th request of m.
func (m *Message) At(i int) *Request {
	if m.Batch {
		return &m.Members[i]
	}
	return &m.Single
}

// IsControl reports whether m is a single request for one of the
// bridge's stream methods (rpc.stream.*), which a WebSocket connection
// answers in order, as it reads it.
func (m *Message) IsControl() bool {
	return !m.Batch && m.Single.Invalid == nil && IsStreamMethod(m.Single.Method)
}

// IsStreamMethod reports whether method is one of the bridge's stream
// methods (rpc.stream.*).
func IsStreamMethod(method []byte) bool {
	return bytes.HasPrefix(method, []byte(StreamPrefix))
}

// maxDepth bounds how deeply arrays and objects may nest in a request body.
// Deeper input is refused as a parse error before anything runs.
const maxDepth = 1000

// Parse failures of wire's own, beside jsonscan's. Their text is fixed and
// safe to show to clients.
var (
	errEmpty    = errors.New("empty body")
	errTrailing = errors.New("data after the JSON value")
)

// SkipSpace returns the index of the first byte at or after b[i] that is
// not JSON whitespace (jsonscan.SkipSpace, for the engine and the
// transports, which read the wire's bytes and know no scanner).
func SkipSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

// Parse reads the JSON-RPC message body: a request object or a batch array
// of at most maxBatch of them. A byte order mark and surrounding space are
// ignored. It fails with the error to answer, with a null id, when body is
// not valid JSON (-32700), is neither an object nor an array, or is an
// empty or too large batch (-32600); nothing of such a message runs.
func Parse(body []byte, maxBatch int, m *Message) *mapping.Error {
	b := body
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:] // a UTF-8 byte order mark, which RFC 8259 lets parsers ignore
	}
	b = b[jsonscan.SkipSpace(b, 0):]
	end, err := jsonscan.Value(b, 0, maxDepth)
	if err == nil && jsonscan.SkipSpace(b, end) != len(b) {
		err = errTrailing
	}
	if err != nil {
		if len(b) == 0 {
			err = errEmpty
		}
		return ParseError(err.Error())
	}
	b = b[:end]
	switch b[0] {
	case '{':
		*m = Message{Single: ParseRequest(b)}
		return nil
	case '[':
		members := SplitArray(b)
		switch {
		case len(members) == 0:
			return InvalidRequest("empty batch")
		case len(members) > maxBatch:
			return InvalidRequest("a batch of " + strconv.Itoa(len(members)) +
				" requests is larger than max_batch_size (" + strconv.Itoa(maxBatch) + "); none of it ran")
		}
		*m = Message{Batch: true, Members: make([]Request, len(members))}
		for i, mb := range members {
			if mb[0] == '{' {
				m.Members[i] = ParseRequest(mb)
			} else {
				m.Members[i] = Request{Invalid: InvalidRequest("a batch member must be a request object")}
			}
		}
		return nil
	}
	return InvalidRequest("a request must be an object, or a batch an array of them")
}

// SplitArray returns the members of the JSON array b, which jsonscan.Value
// has accepted.
func SplitArray(b []byte) [][]byte {
	var members [][]byte
	i := jsonscan.SkipSpace(b, 1)
	if b[i] == ']' {
		return nil
	}
	for {
		end := jsonscan.Skip(b, i)
		members = append(members, b[i:end])
		i = jsonscan.SkipSpace(b, end)
		if b[i] == ']' {
			return members
		}
		i = jsonscan.SkipSpace(b, i+1)
	}
}

// ParseRequest reads the request object b, which jsonscan.Value has
// accepted.
// Members other than jsonrpc, method, params and id make the request
// invalid, as do duplicate members: the specification defines no others,
// and a duplicated member has no single meaning.
func ParseRequest(b []byte) Request {
	var r Request
	var seenVersion, seenMethod, seenParams bool
	i := jsonscan.SkipSpace(b, 1)
	if b[i] == '}' {
		r.Invalid = InvalidRequest(`missing "jsonrpc" member`)
		return r
	}
	for {
		keyEnd, keyEscaped, _ := jsonscan.String(b, i)
		key := b[i+1 : keyEnd-1]
		if keyEscaped {
			key = []byte(jsonscan.Unquote(b[i:keyEnd]))
		}
		i = jsonscan.SkipSpace(b, keyEnd)
		i = jsonscan.SkipSpace(b, i+1) // past ':'
		valStart := i
		i = jsonscan.Skip(b, i)
		val := b[valStart:i]
		if r.Invalid == nil {
			switch string(key) {
			case "jsonrpc":
				if seenVersion {
					r.Invalid = InvalidRequest(`duplicate "jsonrpc" member`)
				} else if !isVersion(val) {
					r.Invalid = InvalidRequest(`"jsonrpc" must be exactly "2.0"`)
				}
				seenVersion = true
			case "method":
				if seenMethod {
					r.Invalid = InvalidRequest(`duplicate "method" member`)
				} else if val[0] != '"' {
					r.Invalid = InvalidRequest(`"method" must be a string`)
				} else {
					r.Method = stringValue(val)
				}
				seenMethod = true
			case "params":
				if seenParams {
					r.Invalid = InvalidRequest(`duplicate "params" member`)
				} else if val[0] != '{' && val[0] != '[' {
					r.Invalid = InvalidRequest(`"params" must be an object or an array`)
				}
				r.Params = val
				seenParams = true
			case "id":
				if r.ID != nil {
					r.Invalid = InvalidRequest(`duplicate "id" member`)
				} else if c := val[0]; c == '{' || c == '[' || c == 't' || c == 'f' {
					r.Invalid = InvalidRequest(`"id" must be a string, a number or null`)
				}
				r.ID = val
			default:
				r.Invalid = InvalidRequest("unknown member " + Quote(key))
			}
		}
		i = jsonscan.SkipSpace(b, i)
		if b[i] == '}' {
			break
		}
		i = jsonscan.SkipSpace(b, i+1) // past ','
	}
	switch {
	case r.Invalid != nil:
	case !seenVersion:
		r.Invalid = InvalidRequest(`missing "jsonrpc" member`)
	case !seenMethod:
		r.Invalid = InvalidRequest(`missing "method" member`)
	}
	return r
}

func isVersion(val []byte) bool {
	if string(val) == `"2.0"` {
		return true
	}
	return val[0] == '"' && jsonscan.Unquote(val) == "2.0"
}

// stringValue returns the contents of the JSON string val, decoding escapes
// only when there are any.
func stringValue(val []byte) []byte {
	if bytes.IndexByte(val, '\\') < 0 {
		return val[1 : len(val)-1]
	}
	return []byte(jsonscan.Unquote(val))
}
