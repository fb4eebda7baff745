package mapping

import (
	"errors"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// Options tunes a Codec. The zero value gives the defaults.
type Options struct {
	// EmitUnpopulated makes results include fields that hold their zero
	// value (0, "", false, [], {}, null). Unset, they are omitted.
	EmitUnpopulated bool
}

// Codec is the prepared converter of one method: JSON params to its request
// message, its response message to JSON. It is built once per discovery and
// is safe for concurrent use.
type Codec struct {
	in        protoreflect.MessageType
	out       protoreflect.MessageType
	res       Resolver
	unmarshal protojson.UnmarshalOptions
	marshal   protojson.MarshalOptions
	// inPlan and outPlan are the fast paths between JSON and wire bytes,
	// nil where the message types need the general path; inWhy and outWhy
	// then say why.
	inPlan, outPlan *plan
	inWhy, outWhy   string
	// byPosition is set for the methods that take one request message,
	// unary and server streaming, whose params may be an array
	// (positional.go).
	byPosition bool
}

// NewCodec prepares the converter of md. Messages are dynamicpb messages of
// md's input and output descriptors; res resolves the types of Any fields
// (a nil res means NewResolver(nil)).
func NewCodec(md protoreflect.MethodDescriptor, res Resolver, opts Options) *Codec {
	if res == nil {
		res = NewResolver(nil)
	}
	c := &Codec{
		in:        dynamicpb.NewMessageType(md.Input()),
		out:       dynamicpb.NewMessageType(md.Output()),
		res:       res,
		unmarshal: protojson.UnmarshalOptions{Resolver: res},
		marshal:   protojson.MarshalOptions{Resolver: res, EmitUnpopulated: opts.EmitUnpopulated},
		// A client stream's array is its request messages
		// (RequestElement); a unary or server-streaming method's array is
		// its one request message by position.
		byPosition: !md.IsStreamingClient(),
	}
	c.inPlan, c.inWhy = newPlan(md.Input())
	if opts.EmitUnpopulated {
		c.outWhy = "results with unpopulated fields (emit_unpopulated)"
	} else {
		c.outPlan, c.outWhy = newPlan(md.Output())
	}
	return c
}

// AppendRequest appends to dst the protobuf wire form of the request
// message that params make, with the same rules and errors as Request.
// Plain messages are transcoded without building a message.
func (c *Codec) AppendRequest(dst, params []byte) ([]byte, *Error) {
	if len(params) == 0 {
		return dst, nil
	}
	why := reasonType
	if c.inPlan != nil {
		var out []byte
		var ok bool
		if firstByte(params) == '[' {
			if c.byPosition {
				if out, ok, why = c.inPlan.appendPositional(dst, params); ok {
					return out, nil
				}
			} else {
				why = reasonSyntax
			}
		} else if out, ok, why = c.inPlan.appendRequestWhy(dst, params); ok {
			return out, nil
		}
	}
	countFallback(dirRequest, why)
	m, e := c.Request(params)
	if e != nil {
		return dst, e
	}
	out, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return dst, invalidParams("", "the params do not make a complete request message")
	}
	return out, nil
}

// AppendResultWire appends to dst the protojson form of the response
// message whose wire form is wire, as AppendResult would write it.
func (c *Codec) AppendResultWire(dst, wire []byte) ([]byte, error) {
	why := reasonType
	if c.outPlan != nil {
		var out []byte
		var ok bool
		if out, ok, why = c.outPlan.appendResultWhy(dst, wire); ok {
			return out, nil
		}
	}
	countFallback(dirResult, why)
	m := c.out.New().Interface()
	if err := unmarshalWire(proto.UnmarshalOptions{Resolver: c.res}, wire, m); err != nil {
		return dst, err
	}
	return c.marshal.MarshalAppend(dst, m)
}

// errBadWire is the error of wire bytes proto.Unmarshal panics on.
var errBadWire = errors.New("mapping: malformed wire bytes")

// unmarshalWire is opts.Unmarshal, with a panic turned into an error:
// proto.Unmarshal (v1.36) panics on a map entry of a dynamicpb message
// whose key field comes twice, the second time with the wrong wire type.
func unmarshalWire(opts proto.UnmarshalOptions, wire []byte, m proto.Message) (err error) {
	defer func() {
		if recover() != nil {
			err = errBadWire
		}
	}()
	return opts.Unmarshal(wire, m)
}

// FastPath says whether the fast path (wire bytes straight to and from JSON,
// without protojson) covers the method's request and result types, and if
// not, why. Inputs it covers may still be left to the general path; see
// Fallbacks.
func (c *Codec) FastPath() (request, result string) {
	return c.inWhy, c.outWhy
}

// Request turns JSON-RPC params into the method's request message.
//
// Absent params (nil or empty) give an empty message. A JSON object is read
// by protojson: both lowerCamelCase JSON names and proto field names are
// accepted, unknown fields are rejected. For a unary or server-streaming
// method, an array is params by position: element i is the value of the
// i-th field of the request message in declaration order, null or a
// missing element leaves its field unset. Anything else is rejected, and
// so is an array for a client- or bidirectional-streaming method, whose
// array is its request messages (RequestElement). Every failure is an
// *Error with CodeInvalidParams whose message names the field and the
// reason and whose Data is {"field": "<dotted JSON path>", "reason":
// "<reason>"} ("field" is left out when the problem is not in one field);
// by position, Data has "position" too, and the message names it.
func (c *Codec) Request(params []byte) (proto.Message, *Error) {
	m := c.in.New().Interface()
	if len(params) == 0 {
		return m, nil
	}
	switch firstByte(params) {
	case '{':
		if err := c.unmarshal.Unmarshal(params, m); err != nil {
			return nil, c.diagnose(params, err)
		}
		return m, nil
	case '[':
		if c.byPosition {
			return c.requestPositional(params)
		}
		return nil, invalidParams("", "params of a client- or bidirectional-streaming method are the array of its request messages, not one message by position")
	default:
		return nil, invalidParams("", "params must be an object of named fields, got "+jsonKind(params, jsonscan.SkipSpace(params, 0)))
	}
}

// NewResponse returns a new, empty response message for the method.
func (c *Codec) NewResponse() proto.Message {
	return c.out.New().Interface()
}

// AppendResult appends the protojson form of m to dst. 64-bit integers are
// JSON strings, as protojson writes them.
func (c *Codec) AppendResult(dst []byte, m proto.Message) ([]byte, error) {
	return c.marshal.MarshalAppend(dst, m)
}

// firstByte returns the first non-whitespace byte of b, or 0.
func firstByte(b []byte) byte {
	if i := jsonscan.SkipSpace(b, 0); i < len(b) {
		return b[i]
	}
	return 0
}
