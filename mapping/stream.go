package mapping

import (
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// RequestElement turns the member at position i of by-position params into
// a request message, for client- and bidirectional-streaming calls whose
// params are the array of their request messages. The member must be a
// JSON object, read as Request reads params; errors are those of Request
// with field paths starting at "[i]" ("[2].title").
func (c *Codec) RequestElement(i int, b []byte) (proto.Message, *Error) {
	return c.requestAt(index(nil, i), b)
}

// RequestMember turns the member key of a params object into a request
// message, as RequestElement does, with field paths starting at key
// ("message.title"). The bridge uses it for the message of
// rpc.stream.send.
func (c *Codec) RequestMember(key string, b []byte) (proto.Message, *Error) {
	return c.requestAt(join(nil, key), b)
}

func (c *Codec) requestAt(path *loc, b []byte) (proto.Message, *Error) {
	if firstByte(b) != '{' {
		return nil, invalidParams(path.String(),
			"a request message must be a JSON object, got "+jsonKind(b, jsonscan.SkipSpace(b, 0)))
	}
	m := c.in.New().Interface()
	if err := c.unmarshal.Unmarshal(b, m); err != nil {
		w := &walker{b: b, res: c.res}
		p := w.message(c.in.Descriptor(), path, 0)
		if p == nil {
			p = &problem{path: path, reason: sanitize(err)}
		}
		return nil, invalidParams(p.path.String(), p.reason)
	}
	return m, nil
}
